/**
 * The bandwidth limit (src/shared/bandwidth-limit.ts): a token bucket on an injected clock, so what it
 * lets through when is checked without waiting for real time; and the `--bwlimit` values it takes.
 */
import { describe, expect, it } from 'vitest';
import { Readable } from 'node:stream';
import { TokenBucket, bandwidthLimitOf, parseBandwidthLimit, parseRate, throttled } from '../../../src/shared/bandwidth-limit.js';
import { ManualClock } from '../../support/manual-clock.js';

/** Lets the promise callbacks that are due run. */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe('token bucket', () => {
  it('starts empty and lets bytes through at its rate, in the order they were asked for', async () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(1000, clock);
    const done: string[] = [];
    void bucket.take(500).then(() => done.push('a'));
    void bucket.take(500).then(() => done.push('b'));
    await settle();
    expect(done).toEqual([]);
    clock.advance(499);
    await settle();
    expect(done).toEqual([]);
    clock.advance(1);
    await settle();
    expect(done).toEqual(['a']);
    clock.advance(500);
    await settle();
    expect(done).toEqual(['a', 'b']);
    expect(bucket.counters).toMatchObject({ bytes: 1000, waits: 2 });
    expect(bucket.counters.waitedMs).toBe(500 + 1000);
  });

  it('fills up to one second of bytes while idle, no more', async () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(1000, clock);
    clock.advance(10_000);
    let done = 0;
    void bucket.take(1000).then(() => done++);
    await settle();
    expect(done).toBe(1);
    void bucket.take(1).then(() => done++);
    await settle();
    expect(done).toBe(1);
    clock.advance(1);
    await settle();
    expect(done).toBe(2);
  });

  it('a take larger than the bucket goes in pieces', async () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(100, clock);
    let done = false;
    void bucket.take(350).then(() => (done = true));
    for (let i = 0; i < 3; i++) {
      clock.advance(1000);
      await settle();
      expect(done).toBe(false);
    }
    clock.advance(500);
    await settle();
    expect(done).toBe(true);
  });

  it('a throttled stream passes every byte, each chunk through the bucket', async () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(1024, clock);
    const chunks = [Buffer.alloc(1024, 1), Buffer.alloc(1024, 2), Buffer.alloc(512, 3)];
    const out = throttled(Readable.from(chunks), bucket);
    const got: Buffer[] = [];
    out.on('data', (c: Buffer) => got.push(c));
    const ended = new Promise((r) => out.on('end', r));
    for (let i = 0; i < 10 && !out.readableEnded; i++) {
      clock.advance(1000);
      // eslint-disable-next-line no-restricted-syntax -- lets the stream's queued callbacks run; the clock is manual, no time is waited for
      await new Promise((r) => setImmediate(r));
    }
    await ended;
    expect(Buffer.concat(got).equals(Buffer.concat(chunks))).toBe(true);
    expect(bucket.counters.bytes).toBe(2560);
  });
});

describe('--bwlimit values', () => {
  it('takes rates with binary suffixes, off, and UP:DOWN', () => {
    expect(parseRate('10M')).toBe(10 * 1024 * 1024);
    expect(parseRate('512k')).toBe(512 * 1024);
    expect(parseRate('1.5G')).toBe(1.5 * 1024 ** 3);
    expect(parseRate('100b')).toBe(100);
    expect(parseRate('64')).toBe(64 * 1024);
    expect(parseRate('2MiB/s')).toBe(2 * 1024 * 1024);
    expect(parseRate('off')).toBe(0);
    expect(parseBandwidthLimit('10M:2M')).toEqual({ upload: 10 * 1024 * 1024, download: 2 * 1024 * 1024, shared: false });
    expect(parseBandwidthLimit('1M')).toEqual({ upload: 1024 * 1024, download: 1024 * 1024, shared: true });
  });

  it('one rate is one bucket for both directions; UP:DOWN two; off none', () => {
    const both = bandwidthLimitOf('1M');
    expect(both.upload).toBe(both.download);
    const split = bandwidthLimitOf('1M:off');
    expect(split.upload?.bytesPerSecond).toBe(1024 * 1024);
    expect(split.download).toBeUndefined();
    expect(bandwidthLimitOf('off')).toEqual({ upload: undefined, download: undefined });
  });

  it('refuses what it cannot read, with what it expected', () => {
    expect(() => parseRate('fast')).toThrow(/expected a rate such as 10M/);
    expect(() => parseBandwidthLimit('08:00,512k 12:00,off')).toThrow(/expected a rate|timetables/);
    expect(() => parseBandwidthLimit('1M:2M:3M')).toThrow(/RATE or UP:DOWN/);
  });
});
