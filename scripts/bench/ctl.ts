/**
 * How long one `cloudlib ctl` call takes, start to exit, against a gateway on the embedded service
 * (`ctl status`, `ctl library ls`, `ctl --help`): the command as shipped (bin/cloudlib.js running the
 * compiled dist/; built first when dist/ is missing or out of date), the same from the TypeScript
 * sources through tsx (CLOUDLIB_RUN_FROM=source, what a development checkout without a build runs), and
 * the baseline of the machine: `node -e ''` (starting Node and nothing else). Target: ≤ 0.3 s a call.
 * Runs standalone: `node --import tsx scripts/bench/ctl.ts` (BENCH_CTL_RUNS=N calls of each, default 10).
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildState } from '../../bin/build-state.js';
import { loadConfig } from '../../src/gateway/config.js';
import { Gateway } from '../../src/gateway/gateway.js';
import { silentLogger } from '../../src/shared/log.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const bin = join(root, 'bin', 'cloudlib.js');
const runs = Number(process.env.BENCH_CTL_RUNS ?? 10);

function timed(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { env }, (err, _stdout, stderr) => {
      if (err) reject(new Error(`${args.join(' ')}: ${err.message} ${stderr}`));
      else resolve(performance.now() - started);
    });
  });
}

async function series(args: string[], env: NodeJS.ProcessEnv): Promise<{ p50_ms: number; max_ms: number }> {
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) ms.push(await timed(args, env));
  ms.sort((a, b) => a - b);
  return { p50_ms: Math.round(ms[Math.floor(ms.length / 2)]!), max_ms: Math.round(ms.at(-1)!) };
}

const state = buildState(root);
if (state.state !== 'current') {
  process.stdout.write(`dist/ is ${state.state}: building it first\n`);
  execFileSync(process.execPath, [join(root, 'scripts', 'build.js')], { stdio: 'inherit' });
}
const dir = await mkdtemp(join(tmpdir(), 'cloudlib-bench-ctl-'));
const config = await loadConfig({ data: dir, webdav: 'off', noMount: true, serviceListen: '127.0.0.1:0', adminListen: '127.0.0.1:0' }, {}, { fuseUsable: false });
config.admin_listen = null;
const gateway = await Gateway.start({ config, logger: silentLogger });
try {
  const socket = join(dir, 'control.sock');
  const { CLOUDLIB_RUN_FROM: _drop, ...env } = process.env;
  const baseline = await series(['-e', ''], env);
  process.stdout.write(JSON.stringify({ bench: 'node -e (baseline)', runs, ...baseline }) + '\n');
  for (const words of [['status'], ['library', 'ls'], ['--help']]) {
    const args = [bin, 'ctl', '--socket', socket, ...words];
    const built = await series(args, env);
    const source = await series(args, { ...env, CLOUDLIB_RUN_FROM: 'source' });
    process.stdout.write(JSON.stringify({
      bench: `ctl ${words.join(' ')}`, runs, dist: built, source, dist_vs_baseline: +(built.p50_ms / Math.max(1, baseline.p50_ms)).toFixed(2),
      target_ms: 300, within_target: built.p50_ms <= 300,
    }) + '\n');
  }
} finally {
  await gateway.stop();
  await rm(dir, { recursive: true, force: true });
}
