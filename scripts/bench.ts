/**
 * `npm run bench [-- NAME...]`: runs the benchmark scripts of scripts/bench/ one after another, each in
 * its own process (so one's memory does not weigh on the next), and prints their figures. Every script
 * measures its own baseline in the same run and prints ratios against it; nothing here is a pass/fail
 * test. NAME filters scripts by file name (`npm run bench -- vfs webdav`).
 */
import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

const dir = fileURLToPath(new URL('./bench/', import.meta.url));
const filters = process.argv.slice(2);
const scripts = (await readdir(dir))
  .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
  .filter((f) => filters.length === 0 || filters.some((n) => f.includes(n)))
  .sort();

if (scripts.length === 0) {
  process.stderr.write(`bench: no script of scripts/bench/ matches ${filters.join(', ')}\n`);
  process.exit(2);
}

const results: { script: string; code: number | null; seconds: number }[] = [];
for (const script of scripts) {
  process.stdout.write(`\n== ${script}\n`);
  const started = performance.now();
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(dir, script)], { stdio: 'inherit' });
    child.on('exit', (c) => resolve(c));
  });
  results.push({ script, code, seconds: Math.round((performance.now() - started) / 1000) });
}

process.stdout.write('\n== summary\n');
for (const r of results) process.stdout.write(`${r.code === 0 ? 'ok    ' : 'FAILED'} ${r.script} (${r.seconds} s)\n`);
process.exitCode = results.every((r) => r.code === 0) ? 0 : 1;
