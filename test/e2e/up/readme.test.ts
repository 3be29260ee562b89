/**
 * The README's control examples, as written, top to bottom, against `cloudlib up` on the demo setup:
 * each line through bash in a scratch folder, with `cloudlib` on the PATH as scripts/bootstrap puts it.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { access, mkdir, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../support/wait-for.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

/** The lines of the fenced sh block under a heading of README.md, comments and blanks left out. */
export async function readmeCommands(heading: string): Promise<string[]> {
  const text = await readFile(join(root, 'README.md'), 'utf8');
  const at = text.indexOf(`\n## ${heading}\n`);
  if (at === -1) throw new Error(`README.md has no section '${heading}'`);
  const block = /```sh\n([\s\S]*?)```/.exec(text.slice(at))![1]!;
  return block.split('\n').map((l) => l.replace(/\s+#(?=[^"']*$).*$/, '').trim()).filter(Boolean);
}

let dir: string;
let child: ChildProcess | undefined;
afterAll(async () => {
  if (child && child.exitCode === null) {
    child.kill('SIGTERM');
    await new Promise((r) => child!.once('exit', r));
  }
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('README examples', { timeout: 180_000 }, () => {
  it('the control commands run in order on the demo setup', async () => {
    const commands = await readmeCommands('Control commands');
    expect(commands.length).toBeGreaterThan(20);
    dir = await mkdtemp(join(tmpdir(), 'cloudlib-readme-'));
    const bin = join(dir, 'bin');
    const work = join(dir, 'work');
    await mkdir(bin);
    await mkdir(work);
    await symlink(join(root, 'bin', 'cloudlib.js'), join(bin, 'cloudlib'));
    const env = { ...process.env, PATH: `${bin}:${process.env.PATH}`, CLOUDLIB_HOME: join(dir, 'data'), CLOUDLIB_LOG_LEVEL: 'warn' };
    child = spawn(process.execPath, [join(root, 'bin', 'cloudlib.js'), 'up', '--webdav', 'off', '--no-mount', '--service-listen', '127.0.0.1:0', '--admin-listen', 'off'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr!.on('data', (c: Buffer) => { log += c.toString(); });
    const up = child;
    await waitFor('cloudlib up to write endpoints.json', () => access(join(dir, 'data', 'endpoints.json')).then(() => true), {
      timeoutMs: 60_000, intervalMs: 100, stopIf: () => (up.exitCode !== null ? `cloudlib up exited with ${up.exitCode}` : undefined), detail: () => log,
    });
    for (const command of commands) {
      const r = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
        execFile('bash', ['-euo', 'pipefail', '-c', command], { cwd: work, env, timeout: 60_000 }, (err, stdout, stderr) => {
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr });
        });
      });
      expect(r.code, `${command}\n${r.stdout}${r.stderr}`).toBe(0);
      expect(r.stderr, command).not.toMatch(/out of date/);
    }
  });
});
