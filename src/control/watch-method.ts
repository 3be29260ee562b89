/**
 * `watch`: streams the changes the gateway hears of (the updates feeds: created, changed, deleted, moved,
 * locked, unlocked; by whom) to the caller as `event` notifications, each as it comes, until the caller
 * goes away or the gateway stops. `path` narrows them to a gateway path and what is below it (a move counts
 * where it went and where it came from).
 */
import { changeConcerns, type ChangeSource } from '../vfs/types.js';
import { RpcErrorCode, RpcFailure } from './protocol.js';
import type { ControlMethod } from './methods.js';

/** The gateway path `raw` names (`/` when none), or InvalidParams. */
export function watchedPath(raw: unknown): string {
  if (raw === undefined) return '/';
  if (typeof raw !== 'string' || !raw.startsWith('/')) throw new RpcFailure(RpcErrorCode.InvalidParams, `path: expected a gateway path /<library>/<path>, got ${JSON.stringify(raw)}`);
  const parts = raw.split('/').filter((p) => p !== '');
  if (parts.some((p) => p === '.' || p === '..' || p.includes('\0'))) throw new RpcFailure(RpcErrorCode.InvalidParams, `path: expected a gateway path without . or .. parts, got ${JSON.stringify(raw)}`);
  return `/${parts.join('/')}`;
}

export function watchMethod(changes: ChangeSource | undefined): ControlMethod {
  return {
    name: 'watch',
    summary: 'Streams changes as they come (created, changed, deleted, moved, locked, unlocked; by whom) as `event` notifications',
    params: [{ name: 'path', required: false, type: 'string', note: 'gateway path: only changes there and below (default: everything)' }],
    handler: async (params, env) => {
      const path = watchedPath(params.path);
      if (!changes) throw new RpcFailure(RpcErrorCode.GatewayError, 'this gateway has no updates feed to watch', { code: 'ENOTSUP' });
      let events = 0;
      await new Promise<void>((resolve, reject) => {
        let stop = (): void => undefined;
        const end = (err?: Error): void => {
          stop();
          env.signal.removeEventListener('abort', onAbort);
          if (err) reject(err);
          else resolve();
        };
        const onAbort = (): void => end();
        stop = changes.subscribe((event) => {
          if (!changeConcerns(event, path)) return;
          events++;
          if (!env.event({ ...event })) end(new RpcFailure(RpcErrorCode.GatewayError, 'watch ended: the caller did not read the changes as fast as they came', { code: 'EOVERFLOW' }));
        });
        if (env.signal.aborted) end();
        else env.signal.addEventListener('abort', onAbort, { once: true });
      });
      return { events };
    },
  };
}
