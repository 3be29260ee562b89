#!/usr/bin/env node
// The `cloudlib` command. Runs the compiled JavaScript of dist/ (`npm run build`, done by
// scripts/bootstrap) when it was built from the sources as they are; otherwise runs the TypeScript
// sources through tsx (a development checkout, or CLOUDLIB_RUN_FROM=source as the tests set), saying
// so on stderr when a build exists but is out of date: a stale build is never run.
import { fileURLToPath } from 'node:url';
import { buildState } from './build-state.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const fromSource = process.env.CLOUDLIB_RUN_FROM === 'source';
const build = fromSource ? { state: 'skipped' } : buildState(root);
let main;
if (build.state === 'current') {
  const { tuneGarbageCollector } = await import('../dist/shared/gc-tuning.js');
  tuneGarbageCollector();
  ({ main } = await import('../dist/cli/main.js'));
} else {
  if (build.state === 'stale') {
    process.stderr.write(`cloudlib: dist/ is out of date (${build.reason}); running from source (slower). Run \`npm run build\` to compile again.\n`);
  }
  const { register } = await import('tsx/esm/api');
  register();
  const { tuneGarbageCollector } = await import('../src/shared/gc-tuning.ts');
  tuneGarbageCollector();
  ({ main } = await import('../src/cli/main.ts'));
}
await main(process.argv.slice(2));
