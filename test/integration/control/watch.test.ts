/**
 * Changes made through the service's API, as the gateway publishes them: `cloudlib ctl watch [PATH]` prints
 * them as they come (a person's lines, or JSON with --json), and the admin listener streams them as
 * Server-Sent Events (`GET /events`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../../src/gateway/config.js';
import { Gateway } from '../../../src/gateway/gateway.js';
import { uploadFile } from '../../../src/api/upload.js';
import type { ServiceClient } from '../../../src/api/client.js';
import { silentLogger } from '../../../src/shared/log.js';
import { waitFor } from '../../support/wait-for.js';

const bin = fileURLToPath(new URL('../../../bin/cloudlib.js', import.meta.url));
let dir: string;
let gateway: Gateway;
let lib: string;
let client: ServiceClient;
const children: ChildProcess[] = [];

/** `cloudlib ctl ARGS` left running; `out()` is what it printed so far. */
function startCtl(args: string[]): { out: () => string; err: () => string; exited: () => boolean } {
  const child = spawn(process.execPath, [bin, 'ctl', '--socket', join(dir, 'control.sock'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr!.on('data', (c: Buffer) => { err += c.toString(); });
  return { out: () => out, err: () => err, exited: () => child.exitCode !== null };
}

const put = (fullpath: string, text: string) => {
  const data = Buffer.from(text);
  return uploadFile(client, { size: data.length, open: (start) => Readable.from([data.subarray(start)]) }, { fullpath });
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'watch-gw-'));
  const config = await loadConfig({ data: dir, webdav: 'off', noMount: true, serviceListen: '127.0.0.1:0', adminListen: '127.0.0.1:0' }, {}, { fuseUsable: false });
  config.feed.interval_ms = 200;
  gateway = await Gateway.start({ config, logger: silentLogger });
  lib = gateway.vfs.libraryNames()[0]!;
  client = gateway.libraries.list()[0]!.client;
}, 60_000);

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await gateway?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('changes made elsewhere, published', { timeout: 60_000 }, () => {
  it('ctl watch prints created, moved, deleted as they come, with who; a PATH narrows them', async () => {
    await client.file.createFolder({ fullpath: 'inbox' });
    const all = startCtl(['--json', 'watch', `/${lib}`]);
    const inbox = startCtl(['watch', `/${lib}/inbox`]);
    await waitFor('both watchers to listen', () => gateway.vfs.changes.listening >= 2, { timeoutMs: 20_000, stopIf: () => (all.exited() || inbox.exited() ? `ctl exited: ${all.err()}${inbox.err()}` : undefined) });
    const events = () => all.out().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    await put('top.txt', 'hello');
    await waitFor('the created event', () => events().some((e) => e.kind === 'created' && e.path === `/${lib}/top.txt`), { timeoutMs: 15_000, detail: () => all.out() });
    expect(events().find((e) => e.path === `/${lib}/top.txt`)).toMatchObject({ kind: 'created', isDir: false, size: 5 });
    await client.file.move({ fullpath: 'top.txt', dest_fullpath: 'inbox/top.txt' });
    await waitFor('the moved event', () => events().some((e) => e.kind === 'moved' && e.path === `/${lib}/inbox/top.txt` && e.from === `/${lib}/top.txt`), { timeoutMs: 15_000, detail: () => all.out() });
    await client.file.del({ fullpath: 'inbox/top.txt' });
    await waitFor('the deleted event', () => events().some((e) => e.kind === 'deleted' && e.path === `/${lib}/inbox/top.txt`), { timeoutMs: 15_000, detail: () => all.out() });
    // The watcher of the folder: the move into it and the delete there, as a person reads them.
    await waitFor('the folder watcher to print the delete', () => / deleted +\/\S+\/inbox\/top\.txt/.test(inbox.out()), { timeoutMs: 15_000, detail: () => inbox.out() });
    const lines = inbox.out().split('\n').filter(Boolean);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(new RegExp(`^\\d\\d:\\d\\d:\\d\\d moved +/${lib}/top\\.txt -> /${lib}/inbox/top\\.txt \\(5 B\\) by \\S+$`));
  });

  it('a lock taken and released through the gateway is printed as locked and unlocked, by whom', async () => {
    const w = startCtl(['--json', 'watch', `/${lib}/locks`]);
    await client.file.createFolder({ fullpath: 'locks' });
    await put('locks/plan.txt', 'plan');
    await waitFor('the watcher to listen', () => gateway.vfs.changes.listening >= 3, { timeoutMs: 20_000, stopIf: () => (w.exited() ? `ctl exited: ${w.err()}` : undefined) });
    const events = () => w.out().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    await gateway.vfs.setLocked(`/${lib}/locks/plan.txt`, true, { operator: { opName: 'dana' } });
    await gateway.vfs.setLocked(`/${lib}/locks/plan.txt`, false, { operator: { opName: 'dana' } });
    await waitFor('locked and unlocked', () => events().filter((e) => e.kind === 'locked' || e.kind === 'unlocked').length === 2, { timeoutMs: 15_000, detail: () => w.out() });
    expect(events().filter((e) => e.kind === 'locked' || e.kind === 'unlocked').map((e) => [e.kind, e.path, e.by])).toEqual([
      ['locked', `/${lib}/locks/plan.txt`, 'dana'],
      ['unlocked', `/${lib}/locks/plan.txt`, 'dana'],
    ]);
  });

  it('ctl watch of a path that is not a gateway path is refused (exit 2), and nothing listens', async () => {
    const bad = startCtl(['watch', 'relative/path']);
    await waitFor('ctl to exit', () => bad.exited(), { timeoutMs: 20_000 });
    expect(bad.err()).toMatch(/path: expected a gateway path/);
    expect(children.at(-1)!.exitCode).toBe(2);
  });

  it('the admin listener streams a change as a Server-Sent Event', async () => {
    let body = '';
    const req = request(`${gateway.adminUrl}/events?path=/${lib}`);
    const status = new Promise<{ status: number; type: string }>((resolve, reject) => {
      req.on('response', (res) => {
        res.on('data', (c: Buffer) => { body += c.toString(); });
        resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']) });
      });
      req.on('error', reject);
    });
    req.end();
    try {
      expect(await status).toEqual({ status: 200, type: 'text/event-stream; charset=utf-8' });
      await waitFor('the stream to open', () => body.startsWith(': changes under'), { timeoutMs: 10_000 });
      await put('streamed.txt', 'sse');
      await waitFor('the change event on the stream', () => /event: change\ndata: .*"path":"[^"]*\/streamed\.txt"/.test(body), { timeoutMs: 15_000, detail: () => body });
      const data = /event: change\ndata: (.*streamed\.txt.*)\n/.exec(body)![1]!;
      expect(JSON.parse(data)).toMatchObject({ kind: 'created', path: `/${lib}/streamed.txt`, size: 3 });
      expect(body).toMatch(/id: \d+\nevent: change/);
    } finally {
      req.destroy();
    }
    const page = await (await fetch(`${gateway.adminUrl}/status.js`)).text();
    expect(page).toContain("new EventSource('/events')");
    expect((await fetch(`${gateway.adminUrl}/events?path=nope`)).status).toBe(400);
  });
});
