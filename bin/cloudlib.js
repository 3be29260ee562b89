#!/usr/bin/env node
// The `cloudlib` command. Runs the TypeScript sources through tsx's loader.
import { register } from 'tsx/esm/api';
register();
const { main } = await import('../src/cli/main.ts');
await main(process.argv.slice(2));
