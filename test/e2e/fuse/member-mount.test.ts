/**
 * `cloudlib up` with `mount.member`: a real FUSE mount (in a child process) acting as a member of the
 * enterprise. The member's folder permissions apply through the mount (EACCES, nothing changed on the
 * service), and what the member may do lands on the service with the member as the operator.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { access, mkdir, mkdtemp, readdir, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fuseUsable } from '../../../src/gateway/gateway.js';
import { AccessTokens } from '../../../src/service/domain/tokens.js';
import { startTestService } from '../../support/service.js';
import { waitFor } from '../../support/wait-for.js';
import { put } from '../../integration/service/helpers.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const bin = join(root, 'bin', 'cloudlib.js');
const canMount = existsSync(join(root, 'src/fuse/index.ts')) && (await fuseUsable());
const ACCOUNT = 'mounted-member@example.com';
const PASSWORD = 'mounted-member-pw';

let data: string;
let mnt: string;
let child: ChildProcess | undefined;
let output = '';

async function errnoOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code;
  }
}

function exited(c: ChildProcess, timeoutMs: number): Promise<number | null> {
  if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve(c.exitCode);
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`process did not exit within ${timeoutMs} ms`)), timeoutMs);
    c.once('exit', (code) => { clearTimeout(t); resolve(code); });
  });
}

/** The service's view of the library (a library client on the same data, the gateway stopped). */
async function onService<T>(fn: (t: Awaited<ReturnType<typeof startTestService>>) => Promise<T>): Promise<T> {
  const t = await startTestService({ dataDir: join(data, 'service') });
  try {
    return await fn(t);
  } finally {
    await t.close();
  }
}

beforeAll(async () => {
  if (!canMount) return;
  data = await mkdtemp(join(tmpdir(), 'cloudlib-member-mount-'));
  mnt = join(data, 'mnt');
  // The service's data first (the member, their password and permissions); `up` opens the same data.
  await onService(async (t) => {
    const db = t.service.parts.tree.db;
    const c = t.service.credentials;
    const id = await db.insert('INSERT INTO members (ent_id, account, name, email, state, created_ms) VALUES (?, ?, ?, ?, 1, ?)', [c.enterprise.ent_id, ACCOUNT, 'Mounted', ACCOUNT, Date.now()]);
    await db.run('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, 5)', [c.library.org_id, id]);
    await new AccessTokens(db, Date.now).setPassword(id, PASSWORD);
    await t.client.file.createFolder({ fullpath: 'Team' });
    await put(t.client, 'Team/plan.txt', 'the plan');
    await t.client.file2.setPermission({ fullpath: 'Team', permissions: JSON.stringify({ member_ids: [id], permission: { role_id: 0, ls: 1, cd: 1, ss: 1, pv: 1, dl: -1, ul: 1, w: -1, mk: -1, ren: -1, rm: -1 } }) });
  });
  const config = join(data, 'cloudlib.toml');
  await writeFile(config, `[mount]\nmember = "${ACCOUNT}"\nmember_password_env = "MEMBER_PW"\n`);
  child = spawn(process.execPath, [bin, 'up', '--data', data, '--config', config, '--mount', mnt, '--webdav', '127.0.0.1:0', '--service-listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'], {
    env: { ...process.env, CLOUDLIB_LOG_LEVEL: 'warn', MEMBER_PW: PASSWORD }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (b: Buffer) => { output += b.toString(); });
  child.stderr!.on('data', (b: Buffer) => { output += b.toString(); });
  const up = child;
  const state = await waitFor('cloudlib up to write endpoints.json', async () => (up.exitCode !== null ? `exited with ${up.exitCode}` : access(join(data, 'endpoints.json')).then(() => 'ready', () => '')), { timeoutMs: 90_000, intervalMs: 100 })
    .catch((err: Error) => { throw new Error(`${err.message}:\n${output}`); });
  if (state !== 'ready') throw new Error(`cloudlib up ${state}:\n${output}`);
}, 120_000);

afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM');
    await exited(child, 30_000).catch(() => child!.kill('SIGKILL'));
  }
  if (mnt) await new Promise<void>((resolve) => execFile('fusermount3', ['-uz', mnt], () => resolve()));
  if (data) await rm(data, { recursive: true, force: true });
}, 60_000);

describe.skipIf(!canMount)('a mount started as a member', { timeout: 120_000 }, () => {
  it("the member's permissions apply (EACCES, nothing changed); what they may do is recorded as theirs", async () => {
    const team = join(mnt, 'Library', 'Team');
    expect(await readdir(team)).toEqual(['plan.txt']);
    expect(await errnoOf(readFile(join(team, 'plan.txt')))).toBe('EACCES');
    expect(await errnoOf(writeFile(join(team, 'plan.txt'), 'changed'))).toBe('EACCES');
    expect(await errnoOf(mkdir(join(team, 'sub')))).toBe('EACCES');
    expect(await errnoOf(unlink(join(team, 'plan.txt')))).toBe('EACCES');
    await writeFile(join(team, 'added.txt'), 'added through the mount');
    expect((await readdir(team)).sort()).toEqual(['added.txt', 'plan.txt']);

    // Stopping flushes the upload; then the service's own record.
    child!.kill('SIGTERM');
    expect(await exited(child!, 60_000)).toBe(0);
    await onService(async (t) => {
      const list = (await t.client.file.ls({ fullpath: 'Team' })).list;
      expect(list.map((e) => e.filename).sort()).toEqual(['added.txt', 'plan.txt']);
      expect(list.find((e) => e.filename === 'added.txt')!.last_member_name).toBe('Mounted');
      expect(Number(list.find((e) => e.filename === 'plan.txt')!.filesize)).toBe('the plan'.length);
    });
  });
});
