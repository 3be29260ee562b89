import { describe, expect, it } from 'vitest';
import { waitFor } from '../support/wait-for.js';

describe('waitFor, the one wait of the tests', () => {
  it('resolves with the value awaited once it comes', async () => {
    let n = 0;
    expect(await waitFor('three checks', () => ++n, { until: (v) => v >= 3, intervalMs: 1 })).toBe(3);
    expect(await waitFor('a truthy value', async () => 'here')).toBe('here');
  });

  it('fails with what it waited for and the last value observed', async () => {
    let n = 0;
    await expect(waitFor('the count to reach 1000', () => ++n, { until: (v) => v >= 1000, timeoutMs: 50, intervalMs: 5 }))
      .rejects.toThrow(/^timed out after 50 ms waiting for the count to reach 1000 \(last observed: \d+\)$/);
  });

  it('names the last error a check threw', async () => {
    await expect(waitFor('a file', () => { throw new Error('ENOENT: no such file'); }, { timeoutMs: 30, intervalMs: 5 }))
      .rejects.toThrow('timed out after 30 ms waiting for a file (last error: ENOENT: no such file)');
  });

  it('stops at once when the value can no longer come (not at the timeout), with the detail asked for', async () => {
    await expect(waitFor('a banner', () => false, { stopIf: () => 'exited with 1', detail: () => 'the output', timeoutMs: 10_000 }))
      .rejects.toThrow('stopped waiting for a banner: exited with 1 (last observed: false)\nthe output');
  });
});
