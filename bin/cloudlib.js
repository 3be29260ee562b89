#!/usr/bin/env node
// The `cloudlib` command. Runs the TypeScript sources through tsx's loader.
import { register } from 'tsx/esm/api';
register();
const { tuneGarbageCollector } = await import('../src/shared/gc-tuning.ts');
tuneGarbageCollector();
const { main } = await import('../src/cli/main.ts');
await main(process.argv.slice(2));
