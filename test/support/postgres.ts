/**
 * startPostgres(): a PostgreSQL cluster of Debian's server for tests, in a temporary folder: initdb,
 * then pg_ctl start on a free port of 127.0.0.1 (socket in the folder, fsync off). PostgreSQL refuses to
 * run as root, so as root (CI, this machine) the cluster belongs to the `postgres` user the Debian
 * package creates, and its programs run through runuser. `stop()` stops it and removes the folder.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chmod, chown, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface Postgres {
  /** `postgresql://cloudlib@127.0.0.1:PORT/postgres` (trust authentication: no password). */
  url: string;
  port: number;
  /** The URL of database `name`, created empty. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

/** Folder of the newest installed server's programs (Debian: /usr/lib/postgresql/VERSION/bin). */
export function postgresBinDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a)) : [];
  if (versions.length === 0) throw new Error('PostgreSQL server not installed (no /usr/lib/postgresql/*/bin/initdb): run scripts/bootstrap');
  return join(root, versions[0]!, 'bin');
}

export interface PostgresStartOptions {
  /** Server settings added to the command line (`name=value`), e.g. `shared_preload_libraries=pg_stat_statements`. */
  settings?: readonly string[];
}

export async function startPostgres(opts: PostgresStartOptions = {}): Promise<Postgres> {
  for (const s of opts.settings ?? []) {
    if (!/^[a-z_.]+=[A-Za-z0-9_.,]+$/.test(s)) throw new TypeError(`setting: expected name=value (letters, digits, _ . ,), got ${JSON.stringify(s)}`);
  }
  const bin = postgresBinDir();
  const dir = await mkdtemp(join(tmpdir(), 'cloudlib-pg-'));
  const data = join(dir, 'data');
  const asRoot = userInfo().uid === 0;
  const as = async (program: string, args: string[]): Promise<string> => {
    const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', join(bin, program), ...args]] : [join(bin, program), args];
    const { stdout } = await run(file, argv, { cwd: dir, timeout: 120_000 });
    return stdout;
  };
  try {
    if (asRoot) {
      const ids = await run('id', ['-u', 'postgres']).then((r) => Number(r.stdout.trim()), () => NaN);
      const gid = await run('id', ['-g', 'postgres']).then((r) => Number(r.stdout.trim()), () => NaN);
      if (!Number.isInteger(ids)) throw new Error('running as root, but there is no postgres user to run PostgreSQL as: run scripts/bootstrap');
      await chown(dir, ids, gid);
      await chmod(dir, 0o700);
    }
    await as('initdb', ['-D', data, '-U', 'cloudlib', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
    const port = await freePort();
    await as('pg_ctl', ['-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '60', '-o',
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200${(opts.settings ?? []).map((v) => ` -c ${v}`).join('')}`, 'start']);
    const url = `postgresql://cloudlib@127.0.0.1:${port}/postgres`;
    return {
      url, port,
      async createDatabase(name: string) {
        if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new TypeError(`database name: expected lowercase letters, digits and _, got ${JSON.stringify(name)}`);
        await run(join(bin, 'createdb'), ['-h', '127.0.0.1', '-p', String(port), '-U', 'cloudlib', name], { timeout: 60_000 });
        return `postgresql://cloudlib@127.0.0.1:${port}/${name}`;
      },
      async stop() {
        await as('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await as('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}
