/**
 * `cloudlib up` (in a child process) whose FUSE mount acts as a member of the enterprise, over the embedded
 * service's data made first in the test's own folder: the members, their passwords and what the test puts
 * on the service. Shared by the e2e tests of member mounts, Office lock files and LibreOffice.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AccessTokens } from '../../../src/service/domain/tokens.js';
import { startTestService } from '../../support/service.js';
import { waitFor } from '../../support/wait-for.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
export const bin = join(root, 'bin', 'cloudlib.js');

export type TestService = Awaited<ReturnType<typeof startTestService>>;

export interface Member {
  account: string;
  name: string;
  /** The member's role in the library (2 editor, 5 a role whose folder permissions the test sets). */
  roleId: number;
}

export interface MemberUpOptions {
  /** Prefix of the test's temporary folder. */
  prefix: string;
  members: Member[];
  /** The password of every member. */
  password: string;
  /** The member the mount acts as (its account). */
  mountMember: string;
  /** WebDAV serves member logins too. */
  memberLogins?: boolean;
  /** Puts on the service what the test starts from; `ids` are the members' ids, in order. */
  prepare?: (t: TestService, ids: number[]) => Promise<void>;
}

export interface MemberUp {
  data: string;
  mnt: string;
  webdavUrl: string;
  child: ChildProcess;
  /** What `cloudlib up` printed so far. */
  output(): string;
  /** The service's view of the library (a library client on the same data): only once `up` stopped. */
  onService<T>(fn: (t: TestService) => Promise<T>): Promise<T>;
  /** `cloudlib ctl` of this gateway; its failure carries what `up` printed. */
  ctl(...args: string[]): Promise<string>;
  /** SIGTERM, and the exit code (a clean stop flushes the uploads first). */
  stop(timeoutMs?: number): Promise<number | null>;
  /** Stops `up` if it still runs, unmounts, removes the folder. */
  close(): Promise<void>;
}

/** The errno code a promise fails with, undefined when it succeeds. */
export async function errnoOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code;
  }
}

export function exited(c: ChildProcess, timeoutMs: number): Promise<number | null> {
  if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve(c.exitCode);
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`cloudlib up did not exit within ${timeoutMs} ms`)), timeoutMs);
    c.once('exit', (code) => { clearTimeout(t); resolve(code); });
  });
}

export async function startMemberUp(opts: MemberUpOptions): Promise<MemberUp> {
  const data = await mkdtemp(join(tmpdir(), opts.prefix));
  const mnt = join(data, 'mnt');
  const onService = async <T>(fn: (t: TestService) => Promise<T>): Promise<T> => {
    const t = await startTestService({ dataDir: join(data, 'service') });
    try {
      return await fn(t);
    } finally {
      await t.close();
    }
  };
  // The service's data first (the members, their passwords and what the test starts from); `up` opens it.
  await onService(async (t) => {
    const db = t.service.parts.tree.db;
    const c = t.service.credentials;
    const ids: number[] = [];
    for (const m of opts.members) {
      const id = await db.insert('INSERT INTO members (ent_id, account, name, email, state, created_ms) VALUES (?, ?, ?, ?, 1, ?)', [c.enterprise.ent_id, m.account, m.name, m.account, Date.now()]);
      await db.run('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, ?)', [c.library.org_id, id, m.roleId]);
      await new AccessTokens(db, Date.now).setPassword(id, opts.password);
      ids.push(id);
    }
    await opts.prepare?.(t, ids);
  });
  const config = join(data, 'cloudlib.toml');
  await writeFile(config, `[mount]\nmember = "${opts.mountMember}"\nmember_password_env = "MEMBER_PW"\n${opts.memberLogins ? '\n[webdav]\nmember_logins = true\n' : ''}`);
  let output = '';
  const child = spawn(process.execPath, [bin, 'up', '--data', data, '--config', config, '--mount', mnt, '--webdav', '127.0.0.1:0', '--service-listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'], {
    env: { ...process.env, CLOUDLIB_LOG_LEVEL: 'warn', MEMBER_PW: opts.password }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (b: Buffer) => { output += b.toString(); });
  child.stderr!.on('data', (b: Buffer) => { output += b.toString(); });
  const up: MemberUp = {
    data, mnt, webdavUrl: '', child, onService,
    output: () => output,
    ctl: (...args) => new Promise((resolve, reject) => execFile(process.execPath, [bin, 'ctl', '--data', data, ...args], { timeout: 60_000 }, (err, stdout, stderr) => (err ? reject(new Error(`cloudlib ctl ${args.join(' ')}: ${err.message}\n${stderr}\ncloudlib up said:\n${output}`)) : resolve(stdout)))),
    async stop(timeoutMs = 60_000) {
      child.kill('SIGTERM');
      return exited(child, timeoutMs);
    },
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exited(child, 30_000).catch(() => child.kill('SIGKILL'));
      }
      await new Promise<void>((resolve) => execFile('fusermount3', ['-uz', mnt], () => resolve()));
      await rm(data, { recursive: true, force: true });
    },
  };
  try {
    const state = await waitFor('cloudlib up to write endpoints.json', async () => (child.exitCode !== null ? `exited with ${child.exitCode}` : access(join(data, 'endpoints.json')).then(() => 'ready', () => '')), { timeoutMs: 90_000, intervalMs: 100 })
      .catch((err: Error) => { throw new Error(`${err.message}:\n${output}`); });
    if (state !== 'ready') throw new Error(`cloudlib up ${state}:\n${output}`);
    up.webdavUrl = (JSON.parse(await readFile(join(data, 'endpoints.json'), 'utf8')) as { webdav_url: string }).webdav_url;
  } catch (err) {
    await up.close();
    throw err;
  }
  return up;
}
