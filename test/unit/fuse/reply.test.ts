import { describe, expect, it, vi } from 'vitest';
import { InFlightCounter, replyWithin } from '../../../src/fuse/reply.js';
import { silentLogger } from '../../../src/shared/log.js';
import { VfsError } from '../../../src/vfs/types.js';

const base = { op: 'test', logger: silentLogger };

function answers(): { cb: (code: number, ...v: unknown[]) => void; calls: unknown[][]; next: Promise<unknown[]> } {
  const calls: unknown[][] = [];
  let resolveNext!: (v: unknown[]) => void;
  const next = new Promise<unknown[]>((r) => (resolveNext = r));
  return { calls, next, cb: (...args) => (calls.push(args), resolveNext(args)) };
}

describe('replyWithin', () => {
  it('answers with the result and its values', async () => {
    const a = answers();
    replyWithin({ ...base, deadlineMs: 1000 }, a.cb, async () => [0, 'x']);
    expect(await a.next).toEqual([0, 'x']);
  });

  it('answers the errno of a thrown VfsError', async () => {
    const a = answers();
    replyWithin({ ...base, deadlineMs: 1000 }, a.cb, async () => {
      throw new VfsError('ENOTEMPTY', 'full');
    });
    expect(await a.next).toEqual([-39]);
  });

  it('answers EIO for a synchronous throw', async () => {
    const a = answers();
    replyWithin({ ...base, deadlineMs: 1000 }, a.cb, () => {
      throw new Error('boom');
    });
    expect(await a.next).toEqual([-5]);
  });

  it('answers EIO at the deadline, aborts the work, and drops the late result', async () => {
    const a = answers();
    let scopeSeen: { live(): boolean; signal: AbortSignal } | undefined;
    let finish!: () => void;
    const inFlight = new InFlightCounter();
    replyWithin({ ...base, deadlineMs: 30, inFlight }, a.cb, (scope) => {
      scopeSeen = scope;
      return new Promise((r) => (finish = () => r(7)));
    });
    expect(await a.next).toEqual([-5]);
    expect(scopeSeen!.live()).toBe(false);
    expect(scopeSeen!.signal.aborted).toBe(true);
    finish();
    expect(await inFlight.drained(1000)).toBe(true); // the late result handled
    expect(a.calls).toHaveLength(1);
  });

  it('aborts a signal the work took before the deadline (the signal is made on first use)', async () => {
    const a = answers();
    let taken: AbortSignal | undefined;
    replyWithin({ ...base, deadlineMs: 20 }, a.cb, (scope) => {
      taken = scope.signal;
      expect(scope.signal).toBe(taken); // one signal per operation
      return new Promise(() => undefined);
    });
    expect(taken!.aborted).toBe(false);
    expect(await a.next).toEqual([-5]);
    expect(taken!.aborted).toBe(true);
    expect(String(taken!.reason)).toMatch(/deadline of 20 ms passed/);
  });

  it('uses the configured deadline errno', async () => {
    const a = answers();
    replyWithin({ ...base, deadlineMs: 10, deadlineErrno: 'EAGAIN' }, a.cb, () => new Promise(() => undefined));
    expect(await a.next).toEqual([-11]);
  });

  it('never answers twice when the late work fails', async () => {
    const a = answers();
    let fail!: () => void;
    const inFlight = new InFlightCounter();
    replyWithin({ ...base, deadlineMs: 10, inFlight }, a.cb, () => new Promise((_r, rej) => (fail = () => rej(new VfsError('ENOENT', 'x')))));
    await a.next;
    fail();
    expect(await inFlight.drained(1000)).toBe(true); // the late failure handled
    expect(a.calls).toEqual([[-5]]);
  });

  it('counts operations in flight until the work settles, even after the deadline', async () => {
    const inFlight = new InFlightCounter();
    let finish!: () => void;
    replyWithin({ ...base, deadlineMs: 5, inFlight }, () => undefined, () => new Promise((r) => (finish = () => r(0))));
    expect(inFlight.size).toBe(1);
    expect(await inFlight.drained(20)).toBe(false);
    const drained = inFlight.drained(1000);
    finish();
    expect(await drained).toBe(true);
    expect(inFlight.size).toBe(0);
  });

  it('survives a callback that throws', async () => {
    const spy = vi.fn(() => {
      throw new Error('native gone');
    });
    const inFlight = new InFlightCounter();
    replyWithin({ ...base, deadlineMs: 1000, inFlight }, spy, async () => 0);
    expect(await inFlight.drained(1000)).toBe(true);
    expect(spy).toHaveBeenCalledTimes(1);
  });
});
