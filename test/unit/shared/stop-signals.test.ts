/**
 * StopSignals: a signal that comes while a command is still starting stops it once started, instead of
 * killing it halfway (run in a child process: the signal is real).
 */
import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const MODULE = fileURLToPath(new URL('../../../src/shared/stop-signals.ts', import.meta.url));

/**
 * A command that catches SIGTERM, says `starting`, and "starts" once told on stdin, then serves (a timer
 * keeps it alive, as a listening server does) until it is stopped.
 */
const COMMAND = `
import { StopSignals } from ${JSON.stringify(MODULE)};
const stop = new StopSignals(['SIGTERM', 'SIGINT']);
process.stdout.write('starting\\n');
await new Promise((resolve) => process.stdin.once('data', resolve));
process.stdin.pause();
process.stdout.write('started\\n');
const serving = setInterval(() => undefined, 1000);
const signal = await stop.received();
clearInterval(serving);
process.stdout.write('stopped by ' + signal + '\\n');
`;

describe('StopSignals', () => {
  it('a SIGTERM while the command starts stops it once started, and it exits as it means to', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', COMMAND], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    await new Promise<void>((resolve) => child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('starting')) resolve();
    }));
    child.kill('SIGTERM');
    // Still starting when the signal came: it finishes starting, then stops.
    child.stdin.end('go\n');
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(out).toBe('starting\nstarted\nstopped by SIGTERM\n');
  }, 30_000);
});
