/**
 * Closes the engine answers itself (docs/fuse.md, Closes answered by the engine): a small file created
 * through the mount is acknowledged once its journal record is in a side log of the upload journal, with
 * JavaScript not involved. The claim a close makes is the same as when the Vfs answers it: a crash of the
 * gateway (kill -9) right after loses nothing. Here JavaScript is held still while `cp` copies the files
 * (every request of the copy is answered in C: were one not, cp would wait for JavaScript and fail its
 * timeout), the gateway is killed while still held, and the next start of a gateway on the same data
 * folder uploads every file as closed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { eventually, sh, startMount, type MountHarness } from './harness.js';
import { MountsOverService } from './mounts-over-service.js';
import { startTestService, type TestService } from '../../support/service.js';
import { createServiceVfs } from '../../../src/remote/service-vfs.js';
import { readCloseRecords, type EngineCloseRecord } from '../../../src/vfs/write-back/engine-close-record.js';

const T = 120_000;

describe('closes answered by the engine, then flushAll', () => {
  let h: MountHarness;
  beforeAll(async () => {
    h = await startMount({ mount: { attrTimeoutS: 600 }, env: { FUSE_TEST_BACKEND: 'service', FUSE_TEST_UPLOAD_DELAY_MS: '600000' } });
  }, T);
  afterAll(async () => {
    await h?.stop();
  }, T);

  it('a flushAll (ctl flush, fsync of a folder) right after a close the engine answered uploads the file', async () => {
    await mkdir(join(h.mnt, 'Lib/flushed'));
    // One descriptor closed (one flush), another kept open: no request follows to carry the close's record along.
    const script = 'import os, sys, time\nfd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL)\n' +
      'os.write(fd, b"closed, still open")\nos.close(os.dup(fd))\nprint("closed", flush=True)\ntime.sleep(20)\n';
    const child = spawn('python3', ['-c', script, join(h.mnt, 'Lib/flushed/kept-open.txt')], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (c: Buffer) => { if (c.toString().includes('closed')) resolve(); });
        child.once('exit', (code) => reject(new Error(`the writer exited early (${code})`)));
      });
      expect((await h.call<{ answered: { closes: number } }>('mountCounters')).answered.closes).toBe(1);
      await h.call('flushAll');
      expect(Buffer.from(await h.call<string>('remoteRead', { path: '/Lib/flushed/kept-open.txt' }), 'base64').toString()).toBe('closed, still open');
    } finally {
      child.kill();
    }
  }, T);
});

describe('closes answered by the engine, then kill -9', () => {
  let mounts: MountsOverService<TestService> | undefined;

  beforeAll(async () => {
    mounts = await MountsOverService.start(await startTestService(), 'cloudlib-closes-');
  }, T);
  afterAll(async () => {
    await mounts?.stop();
  }, T);

  it('files copied while JavaScript is held still, the gateway killed: the next start uploads every one as closed', async () => {
    const { service: svc, dataDir } = mounts!;
    const h = await mounts!.mount({
      mount: { attrTimeoutS: 600 },
      // Uploads held back: what the service gets comes from the journal at the next start.
      env: { FUSE_TEST_UPLOAD_DELAY_MS: '600000' },
    });
    const src = join(h.local, 'src');
    await mkdir(src);
    const files = Array.from({ length: 20 }, (_, i) => ({ name: `f${i}${i % 5 === 0 ? ' "quoted\\ñame"' : ''}.bin`, data: Buffer.alloc(i === 3 ? 0 : 100 + i * 3000, i + 1) }));
    for (const f of files) await writeFile(join(src, f.name), f.data);
    // A folder made through the mount: the engine knows its names (none) and where it is.
    await mkdir(join(h.mnt, 'Lib/copied'));
    // Their attributes as JavaScript shows them, cached by the kernel and the engine for the copy.
    await stat(join(h.mnt, 'Lib'));
    await stat(join(h.mnt, 'Lib/copied'));
    const marker = join(h.local, 'stalled');
    await h.call('stall', { ms: 90_000, marker });
    await eventually('JavaScript is held still', async () => ((await stat(marker).catch(() => undefined)) ? true : undefined), 15_000);
    // One cp a file (a cp of several stats each file it made, which JavaScript would answer).
    await sh('sh', ['-c', 'for f in "$1"/*; do cp "$f" "$2"/ || exit 1; done', 'sh', src, join(h.mnt, 'Lib/copied')], { timeoutMs: 30_000 });
    // Acknowledged: every close returned. The gateway dies before JavaScript saw any of it.
    const killed = new Promise<void>((resolve) => h.child.once('exit', () => resolve()));
    h.child.kill('SIGKILL');
    await killed;
    await h.stop();
    const sides = (await readdir(join(dataDir, 'journal'))).filter((n) => n.startsWith('closes.'));
    expect(sides.length).toBe(1);
    // The engine's own close records, one a file, each with the file's bytes.
    const records: EngineCloseRecord[] = [];
    for await (const r of readCloseRecords(join(dataDir, 'journal', sides[0]!))) records.push(r);
    expect(records.map((r) => r.fullpath).sort()).toEqual(files.map((f) => `copied/${f.name}`).sort());
    for (const f of files) expect(records.find((r) => r.fullpath === `copied/${f.name}`)!.data.equals(f.data)).toBe(true);

    // The next start: a gateway on the same data folder.
    const vfs = await createServiceVfs({ libraries: [{ name: 'Lib', client: svc.client }], dataDir, feedIntervalMs: 0 });
    try {
      await vfs.flushAll({ timeoutMs: 60_000 });
      for (const f of files) {
        const { urls } = await svc.client.file.downloadUrl({ fullpath: `copied/${f.name}` });
        const res = await fetch(urls[0]!);
        expect(Buffer.from(await res.arrayBuffer()).equals(f.data)).toBe(true);
      }
    } finally {
      await vfs.close();
    }
    // Replayed into the journal's own log: the side log is gone.
    expect((await readdir(join(dataDir, 'journal'))).filter((n) => n.startsWith('closes.'))).toEqual([]);
    // Spools without a record (with passthrough, those the killed engine had made ahead) went at the start,
    // the uploaded ones into the pool: no spool is left.
    expect((await readdir(join(dataDir, 'journal', 'spool'))).filter((n) => /^[0-9a-f]{16}$/.test(n))).toEqual([]);
  }, T);
});
