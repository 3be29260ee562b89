/**
 * The admin listener's `GET /events`: the changes the gateway hears of, as a Server-Sent Events stream
 * (`event: change`, `id:` the event's seq, `data:` the event as JSON), each as it comes; `?path=/Lib/dir`
 * narrows it to a gateway path and below. The status page listens to it to update itself at once. A
 * comment every 15 s keeps the connection open through idle timeouts; a client that does not read is cut
 * off once its backlog passes a bound (memory stays bounded), and reconnects as EventSource does.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { changeConcerns, type ChangeSource } from '../vfs/types.js';

const HEARTBEAT_MS = 15_000;
/** Bytes a client may leave unread before it is cut off. */
const MAX_BACKLOG_BYTES = 1024 * 1024;

/** The gateway path of `?path=` (`/` when none); undefined when it is not one. */
export function streamPath(url: string): string | undefined {
  const raw = new URL(url, 'http://admin').searchParams.get('path');
  if (raw === null) return '/';
  if (!raw.startsWith('/')) return undefined;
  const parts = raw.split('/').filter((p) => p !== '');
  if (parts.some((p) => p === '.' || p === '..')) return undefined;
  return `/${parts.join('/')}`;
}

/** Answers `req` with the event stream of `changes` until the client goes away. */
export function serveEventStream(req: IncomingMessage, res: ServerResponse, changes: ChangeSource | undefined): void {
  const path = streamPath(req.url ?? '/');
  if (path === undefined) {
    res.writeHead(400, { 'content-type': 'text/plain' }).end('path: expected a gateway path /<library>/<path>\n');
    return;
  }
  if (!changes) {
    res.writeHead(501, { 'content-type': 'text/plain' }).end('this gateway has no updates feed to stream\n');
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  // A stream stays open: no idle timeout of the listener applies to it (the heartbeat keeps it moving).
  req.socket.setTimeout(0);
  res.write(`: changes under ${path}\n\n`);
  const heartbeat = setInterval(() => res.write(': still here\n\n'), HEARTBEAT_MS);
  heartbeat.unref();
  const stop = changes.subscribe((event) => {
    if (!changeConcerns(event, path)) return;
    res.write(`id: ${event.seq}\nevent: change\ndata: ${JSON.stringify(event)}\n\n`);
    if (res.writableLength > MAX_BACKLOG_BYTES) res.destroy();
  });
  res.on('close', () => {
    clearInterval(heartbeat);
    stop();
  });
}
