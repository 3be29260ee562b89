/**
 * Debian's litmus (basic, copymove, props, locks, http) against the WebDAV server over an in-memory Vfs:
 * every test of every suite passes.
 */
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startMemoryDav, type MemoryDav } from '../../support/serve-memory-dav.js';

const haveLitmus = spawnSync('litmus', ['--version']).error === undefined;

function runLitmus(url: string, cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('litmus', [url, 'alice', 'secret'], { cwd, env: { ...process.env, TESTS: 'basic copymove props locks http' } });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 100_000);
    child.on('error', reject);
    child.on('close', () => { clearTimeout(timer); resolve(out); });
  });
}

describe.skipIf(!haveLitmus)('litmus against the WebDAV server', { timeout: 120_000 }, () => {
  let dav: MemoryDav;
  let work: string;
  beforeAll(async () => {
    dav = await startMemoryDav();
    work = await mkdtemp(join(tmpdir(), 'cloudlib-litmus-'));
  });
  afterAll(async () => {
    await dav?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('passes every test of basic, copymove, props, locks and http', async () => {
    const out = await runLitmus(`${dav.url}Library/`, work);
    const summaries = [...out.matchAll(/<- summary for `(\w+)': of (\d+) tests run: (\d+) passed, (\d+) failed/g)].map((m) => ({ suite: m[1], run: Number(m[2]), passed: Number(m[3]), failed: Number(m[4]) }));
    const failing = out.split('\n').filter((l) => /FAIL/.test(l));
    expect(failing, out.slice(-3000)).toEqual([]);
    expect(summaries.map((s) => s.suite)).toEqual(['basic', 'copymove', 'props', 'locks', 'http']);
    expect(summaries.reduce((n, s) => n + s.passed, 0)).toBe(104);
  });
});
