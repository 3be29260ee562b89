/**
 * A real LibreOffice (headless, driven through UNO by libreoffice-driver.py) opens, edits, saves and closes
 * a document on the FUSE mount of `cloudlib up`, the mount acting as one member (Ann); another member (Bob)
 * logs in through WebDAV. While the document is open, its lock file `.~lock.x.odt#` is a service lock:
 * Bob's LOCK and PUT get 423, also after the save (LibreOffice deletes and makes its lock file again around
 * a save, and saves through a temporary file renamed over the document). Once closed, the lock is released,
 * and the saved document is the file's new version on the service: same file, an older version in its
 * history, no temporary file, lock file or conflict copy beside it. While Bob holds the document locked,
 * LibreOffice on the mount opens it read-only. Then the same LibreOffice, as Bob, edits it through WebDAV
 * (LOCK, PUT, UNLOCK): Ann's mount shows it read-only and refuses her writes (EACCES) until it is closed,
 * and Bob's save is the next version.
 *
 * One LibreOffice runs for the whole file. Skipped when LibreOffice with its Python bridge (soffice,
 * python3-uno: scripts/bootstrap installs them) is not on this machine.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { fuseUsable } from '../../../src/gateway/gateway.js';
import { basicAuth, dav, LOCK_BODY, lockTokenOf } from '../../support/dav-http.js';
import { waitFor } from '../../support/wait-for.js';
import { put } from '../../integration/service/helpers.js';
import { errnoOf, startMemberUp, type MemberUp } from './member-up.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const driverScript = fileURLToPath(new URL('./libreoffice-driver.py', import.meta.url));
/** The system's Python: the one python3-uno installs `uno` for (a python3 earlier on the PATH may lack it). */
const PYTHON = '/usr/bin/python3';
const canMount = existsSync(join(root, 'src/fuse/index.ts')) && (await fuseUsable());
const noLibreOffice = ((): string | undefined => {
  if (spawnSync('soffice', ['--version'], { stdio: 'ignore' }).status !== 0) return 'soffice is not installed (scripts/bootstrap installs libreoffice-writer-nogui)';
  if (spawnSync(PYTHON, ['-c', 'import uno'], { stdio: 'ignore' }).status !== 0) return `${PYTHON} cannot import uno (scripts/bootstrap installs python3-uno)`;
  return undefined;
})();
if (noLibreOffice) console.warn(`libreoffice-save: skipped: ${noLibreOffice}`);
const ANN = 'ann@example.com';
const BOB = 'bob@example.com';
const PASSWORD = 'libreoffice-save-pw';
/** How long LibreOffice may take to start, or to answer one request (a cold start on a busy machine). */
const LO_MS = 90_000;

/** One headless LibreOffice for the file: requests answered in order. */
class LibreOffice {
  private readonly answers: string[] = [];
  /** The request waiting for its answer: told of each line, and of the driver's exit. */
  private waiter: ((line: string | undefined) => void) | undefined;
  private stderr = '';
  /** LibreOffice's process group (the driver's answer when ready). */
  private group: number | undefined;

  private constructor(private readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (this.waiter) this.waiter(line);
      else this.answers.push(line);
    });
    child.stderr!.on('data', (b: Buffer) => { this.stderr += b.toString(); });
    child.once('exit', () => this.waiter?.(undefined));
  }

  static async start(profile: string): Promise<LibreOffice> {
    const lo = new LibreOffice(spawn(PYTHON, [driverScript, profile], { stdio: ['pipe', 'pipe', 'pipe'] }));
    try {
      await lo.answer('LibreOffice to start and listen (soffice --headless)');
    } catch (err) {
      await lo.quit();
      throw err;
    }
    return lo;
  }

  /** The next answer, within LO_MS; fails naming `what` it waited for. */
  private async answer(what: string): Promise<unknown> {
    const line = this.answers.shift() ?? await new Promise<string>((resolve, reject) => {
      if (this.child.exitCode !== null) return reject(new Error(`LibreOffice's driver had exited (${this.child.exitCode}) before ${what}: ${this.stderr}`));
      const timer = setTimeout(() => {
        this.waiter = undefined;
        reject(new Error(`timed out after ${LO_MS} ms waiting for ${what}: ${this.stderr}`));
      }, LO_MS);
      this.waiter = (l) => {
        clearTimeout(timer);
        this.waiter = undefined;
        if (l === undefined) reject(new Error(`LibreOffice's driver exited (${this.child.exitCode}) while waiting for ${what}: ${this.stderr}`));
        else resolve(l);
      };
    });
    const a = JSON.parse(line) as { ok?: unknown; error?: string; group?: number };
    if (a.group !== undefined) this.group = a.group;
    if (a.error !== undefined) throw new Error(`LibreOffice failed ${what}: ${a.error}`);
    return a.ok;
  }

  async request(what: string, req: Record<string, string>): Promise<unknown> {
    this.child.stdin!.write(`${JSON.stringify(req)}\n`);
    return this.answer(what);
  }

  /** Ends LibreOffice and the driver; what is left of LibreOffice's process group after that is killed. */
  async quit(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const gone = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
      this.child.stdin!.end(`${JSON.stringify({ op: 'quit' })}\n`);
      const t = setTimeout(() => this.child.kill('SIGKILL'), 45_000);
      await gone;
      clearTimeout(t);
    }
    if (this.group === undefined) return;
    try {
      process.kill(-this.group, 'SIGKILL');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }
}

/** LibreOffice's own folder (its profile, the document it makes first), beside the gateway's. */
let loDir: string | undefined;
let up: MemberUp | undefined;
let lo: LibreOffice | undefined;

beforeAll(async () => {
  if (!canMount || noLibreOffice) return;
  loDir = await mkdtemp(join(tmpdir(), 'cloudlib-libreoffice-'));
  lo = await LibreOffice.start(join(loDir, 'profile'));
  // The document, made by LibreOffice outside the mount and put on the service as x.odt.
  const made = join(loDir, 'made.odt');
  await lo.request('a new document stored outside the mount', { op: 'new', path: made, text: 'first draft' });
  const bytes = await readFile(made);
  up = await startMemberUp({
    prefix: 'cloudlib-libreoffice-up-', password: PASSWORD, mountMember: ANN, memberLogins: true,
    members: [{ account: ANN, name: 'Ann', roleId: 2 }, { account: BOB, name: 'Bob', roleId: 2 }],
    prepare: async (t) => { await put(t.client, 'x.odt', bytes); },
  });
}, 240_000);

afterAll(async () => {
  await lo?.quit();
  await up?.close();
  if (loDir) await rm(loDir, { recursive: true, force: true });
}, 90_000);

describe.skipIf(!canMount || !!noLibreOffice)('LibreOffice saving a document on the mount', { timeout: 300_000 }, () => {
  it('locks it on the service for another member while open, and leaves a new version, unlocked, once closed; opens it read-only while another member holds it', async () => {
    const bob = basicAuth(BOB, PASSWORD);
    const folder = join(up!.mnt, 'Library');
    const doc = join(folder, 'x.odt');
    const bobRefused = async (when: string): Promise<void> => {
      expect((await dav(up!.webdavUrl, 'LOCK', '/Library/x.odt', { body: LOCK_BODY(), auth: bob })).status, `Bob's LOCK ${when}`).toBe(423);
      expect((await dav(up!.webdavUrl, 'PUT', '/Library/x.odt', { body: 'Bob', auth: bob })).status, `Bob's PUT ${when}`).toBe(423);
    };

    expect(await lo!.request('LibreOffice to open x.odt on the mount', { op: 'open', path: doc })).toBe('editing');
    expect((await readdir(folder)).sort()).toEqual(['.~lock.x.odt#', 'x.odt']);
    expect(await readFile(join(folder, '.~lock.x.odt#'), 'utf8')).toMatch(/,/);
    await bobRefused('while LibreOffice has the document open');

    await lo!.request('LibreOffice to edit x.odt', { op: 'edit', text: 'saved by LibreOffice' });
    await lo!.request('LibreOffice to save x.odt in place', { op: 'store' });
    expect((await readdir(folder)).sort()).toEqual(['.~lock.x.odt#', 'x.odt']);
    await bobRefused('after LibreOffice saved, the document still open');

    await lo!.request('LibreOffice to close x.odt', { op: 'close' });
    expect(await readdir(folder)).toEqual(['x.odt']);
    // What LibreOffice saved is what it reads back.
    expect(await lo!.request('LibreOffice to read x.odt back', { op: 'text', path: doc })).toBe('saved by LibreOffice');
    const saved = await readFile(doc);
    await up!.ctl('flush', '--timeout', '60');
    // Released on the service: Bob locks it now (once his view has the unlock), and unlocks it again.
    const lock = await waitFor('Bob\'s LOCK to be granted once LibreOffice closed the document', () => dav(up!.webdavUrl, 'LOCK', '/Library/x.odt', { body: LOCK_BODY(), auth: bob }), { until: (r) => r.status === 200, timeoutMs: 30_000, intervalMs: 200 });
    // The other way round: while Bob holds it locked, LibreOffice on the mount opens it read-only (the
    // mount shows it without write bits) and makes no lock file.
    await waitFor('the mount to show x.odt read-only while Bob holds it locked', async () => ((await stat(doc)).mode & 0o222) === 0, { timeoutMs: 30_000, intervalMs: 200 });
    expect(await lo!.request('LibreOffice to open x.odt locked by Bob', { op: 'open', path: doc })).toBe('read-only');
    expect(await readdir(folder)).toEqual(['x.odt']);
    await lo!.request('LibreOffice to close x.odt opened read-only', { op: 'close' });
    expect((await dav(up!.webdavUrl, 'UNLOCK', '/Library/x.odt', { headers: { 'lock-token': `<${lockTokenOf(lock)}>` }, auth: bob })).status).toBe(204);
    // What LibreOffice saved through the mount is the file's new version on the service (its history is
    // checked at the end).
    expect((await readFile(doc)).equals(saved)).toBe(true);
  });

  it('through WebDAV: locks it while open (the mount refuses the other member with EACCES), saves a new version, unlocks it once closed', async () => {
    const doc = join(up!.mnt, 'Library', 'x.odt');
    const url = `vnd.sun.star.webdav://${new URL(up!.webdavUrl).host}/Library/x.odt`;
    expect(await lo!.request('LibreOffice to open x.odt through WebDAV as Bob', { op: 'open', url, user: BOB, password: PASSWORD })).toBe('editing');
    // LibreOffice took a WebDAV lock: a service lock, which Ann's mount shows read-only and refuses.
    await waitFor('the mount to show x.odt read-only while LibreOffice has it open through WebDAV', async () => ((await stat(doc)).mode & 0o222) === 0, { timeoutMs: 30_000, intervalMs: 200 });
    expect(await errnoOf(writeFile(doc, 'Ann'))).toBe('EACCES');
    await lo!.request('LibreOffice to edit x.odt opened through WebDAV', { op: 'edit', text: 'saved by Bob through WebDAV' });
    await lo!.request('LibreOffice to save x.odt through WebDAV', { op: 'store' });
    expect(await errnoOf(writeFile(doc, 'Ann'))).toBe('EACCES');
    await lo!.request('LibreOffice to close x.odt opened through WebDAV', { op: 'close' });
    // Unlocked, and Bob's save is what the mount shows (once Ann's view has it).
    await waitFor('the mount to show x.odt writable once LibreOffice closed it', async () => ((await stat(doc)).mode & 0o222) !== 0, { timeoutMs: 30_000, intervalMs: 200 });
    await waitFor('the mount to show Bob\'s save', () => lo!.request('LibreOffice to read x.odt on the mount', { op: 'text', path: doc }), { until: (t) => t === 'saved by Bob through WebDAV', timeoutMs: 30_000, intervalMs: 500 });
    expect(await readdir(join(up!.mnt, 'Library'))).toEqual(['x.odt']);
    await onServiceNow(await readFile(doc), 3);
  });
});

/**
 * Stops the gateway, then: x.odt alone in the library, unlocked, holding `content`, with at least `versions`
 * versions (the first, LibreOffice's save through the mount, and Bob's through WebDAV).
 */
async function onServiceNow(content: Buffer, versions: number): Promise<void> {
  await up!.ctl('flush', '--timeout', '60');
  expect(await up!.stop()).toBe(0);
  await up!.onService(async (t) => {
    expect((await t.client.file.ls({ fullpath: '' })).list.map((e) => e.filename)).toEqual(['x.odt']);
    const info = await t.client.file.info({ fullpath: 'x.odt' });
    expect(Number(info.lock)).toBe(0);
    const { urls } = await t.client.file.downloadUrl({ fullpath: 'x.odt' });
    expect(Buffer.from(await (await fetch(urls[0]!)).arrayBuffer()).equals(content)).toBe(true);
    expect((await t.client.file.history({ fullpath: 'x.odt' })).list.length).toBeGreaterThanOrEqual(versions);
  });
}
