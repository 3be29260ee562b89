/**
 * Member logins: what acting through the member's own token costs, per WebDAV request, against the
 * other way of enforcing a member's permissions (the gateway evaluating them itself). A gateway on the
 * embedded service with `webdav.member_logins`; a folder of 3 × RUNS files of 64 KiB. Figures (median ms
 * over RUNS requests, every cache of the gateway dropped before each request so that each one reaches
 * the service):
 * - `library`: the library authorization (a configured user; no member permission applied): the baseline,
 *   and what gateway-side evaluation costs with its permission cache warm.
 * - `member`: the member's session (user file API, the service checks each call).
 * - `gateway-eval`: prototype of gateway-side evaluation with a cold permission cache: the library
 *   path plus the member's permission on the folder asked of the service (get_member_permission).
 * Runs standalone: `node --import tsx scripts/bench/members.ts` (BENCH_MEMBERS_RUNS, default 40).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:http';
import { randomBytes } from 'node:crypto';
import { ServiceClient } from '../../src/api/client.js';
import { uploadFile } from '../../src/api/upload.js';
import { loadConfig } from '../../src/gateway/config.js';
import { Gateway } from '../../src/gateway/gateway.js';
import { AccessTokens } from '../../src/service/domain/tokens.js';
import type { EmbeddedService } from '../../src/service/index.js';
import { silentLogger } from '../../src/shared/log.js';
import { Readable } from 'node:stream';
import { createHash } from 'node:crypto';

const RUNS = Number(process.env.BENCH_MEMBERS_RUNS ?? 40);
const FILES = 3 * RUNS;
const SIZE = 64 * 1024;

function dav(base: string, method: string, path: string, auth: string, depth?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, base), { method, headers: { authorization: auth, ...(depth ? { depth } : {}) } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 || res.statusCode === 207 ? resolve(res.statusCode) : reject(new Error(`${method} ${path}: HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

const median = (ms: number[]): number => {
  const s = [...ms].sort((a, b) => a - b);
  return Math.round(s[Math.floor(s.length / 2)]! * 100) / 100;
};

const dir = await mkdtemp(join(tmpdir(), 'cloudlib-bench-members-'));
const config = await loadConfig({ data: dir, webdav: '127.0.0.1:0', noMount: true, serviceListen: '127.0.0.1:0', adminListen: '127.0.0.1:0' }, {}, { fuseUsable: false });
config.admin_listen = null;
config.webdav.member_logins = true;
config.webdav.users = [{ name: 'admin', password: 'admin-password' }];
const gateway = await Gateway.start({ config, logger: silentLogger });
try {
  const svc = gateway.service as unknown as EmbeddedService;
  const c = svc.credentials;
  const client = new ServiceClient({ baseUrl: gateway.serviceUrl, credentials: { library: { org_client_id: c.library.org_client_id, org_client_secret: c.library.org_client_secret } } });
  const db = svc.parts.tree.db;
  const account = 'bench-member@example.com';
  const memberId = await db.insert('INSERT INTO members (ent_id, account, name, email, state, created_ms) VALUES (?, ?, ?, ?, 1, ?)', [c.enterprise.ent_id, account, 'Bench', account, Date.now()]);
  await db.run('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, 5)', [c.library.org_id, memberId]);
  await new AccessTokens(db, Date.now).setPassword(memberId, 'bench-pw');
  await client.file.createFolder({ fullpath: 'Bench' });
  await client.file2.setPermission({ fullpath: 'Bench', permissions: JSON.stringify({ member_ids: [memberId], permission: { role_id: 0, ls: 1, cd: 1, ss: 1, pv: 1, dl: 1 } }) });
  for (let i = 0; i < FILES; i++) {
    const data = randomBytes(SIZE);
    const sha1 = createHash('sha1').update(data).digest('hex');
    await uploadFile(client, { size: data.length, filehash: sha1, open: (start: number) => Readable.from([data.subarray(start)]) }, { fullpath: `Bench/f${i}.bin`, overwrite: true, finishWaitMs: 50 });
  }
  const base = gateway.webdavUrl!;
  const libraryAuth = 'Basic ' + Buffer.from('admin:admin-password').toString('base64');
  const memberAuth = 'Basic ' + Buffer.from(`${account}:bench-pw`).toString('base64');
  await dav(base, 'PROPFIND', '/Library/Bench/', memberAuth, '1');
  const login = await gateway.members!.login(account, 'bench-pw');
  if (!('session' in login)) throw new Error(login.refused);
  const memberVfs = login.session.vfs;
  const drop = () => { gateway.vfs.cache.dropLibrary('Library'); memberVfs.cache.dropLibrary('Library'); };

  let ways = 0;
  const way = async (auth: string, extra?: () => Promise<unknown>) => {
    const first = RUNS * ways++;
    const propfind: number[] = [];
    const get: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      drop();
      let t0 = performance.now();
      await extra?.();
      await dav(base, 'PROPFIND', '/Library/Bench/', auth, '1');
      propfind.push(performance.now() - t0);
      drop();
      t0 = performance.now();
      // A file no way read before (nothing in a block cache), 64 KiB.
      await extra?.();
      await dav(base, 'GET', `/Library/Bench/f${first + i}.bin`, auth);
      get.push(performance.now() - t0);
    }
    return { propfind_ms: median(propfind), get_ms: median(get) };
  };
  const library = await way(libraryAuth);
  const member = await way(memberAuth);
  const evalProto = await way(libraryAuth, () => client.file2.getMemberPermission({ fullpath: 'Bench', account }));
  const ratio = (x: number, b: number) => Math.round((x / b) * 100) / 100;
  const out = {
    runs: RUNS, files_in_folder: FILES, file_bytes: SIZE,
    library, member, gateway_eval_cold: evalProto,
    member_vs_library: { propfind: ratio(member.propfind_ms, library.propfind_ms), get: ratio(member.get_ms, library.get_ms) },
    gateway_eval_cold_vs_library: { propfind: ratio(evalProto.propfind_ms, library.propfind_ms), get: ratio(evalProto.get_ms, library.get_ms) },
  };
  process.stdout.write(JSON.stringify(out, null, 2) + '\n');
  await client.close();
} finally {
  await gateway.stop();
  await rm(dir, { recursive: true, force: true });
}
