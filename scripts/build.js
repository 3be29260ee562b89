#!/usr/bin/env node
// `npm run build`: compiles src/ to dist/ (tsc -p tsconfig.build.json), copies the files that are not
// TypeScript (browser assets, worker scripts) beside the compiled modules, and records what the build
// was made from in dist/build.json, which `bin/cloudlib.js` checks before running dist/.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourcesSnapshot } from '../bin/build-state.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const src = join(root, 'src');
const dist = join(root, 'dist');
const started = Date.now();
// Taken before compiling: a source edited while the build runs makes the build stale, never current.
const sources = sourcesSnapshot(root);
rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit', cwd: root });
let copied = 0;
const copyOthers = (dir) => {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) copyOthers(p);
    else if (e.isFile() && !e.name.endsWith('.ts')) {
      const to = join(dist, relative(src, p));
      mkdirSync(dirname(to), { recursive: true });
      cpSync(p, to);
      copied++;
    }
  }
};
copyOthers(src);
writeFileSync(join(dist, 'build.json'), JSON.stringify({ built_at: new Date().toISOString(), sources }, null, 2) + '\n');
process.stdout.write(`build: src/ compiled to dist/ (${copied} other files copied) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
