/** SignatureLedger: a signature is bound to its first endpoint while its window lasts; memory stays bounded. */
import { describe, expect, it } from 'vitest';
import { SignatureLedger } from '../../../src/service/http/signature-ledger.js';

describe('SignatureLedger', () => {
  it('names the other endpoint of a reused signature; the same endpoint (a retry) passes', () => {
    let now = 1_000_000;
    const ledger = new SignatureLedger({ windowMs: 60_000, clock: () => now });
    expect(ledger.use('s1', '/m-open/1/file/info', now)).toBeUndefined();
    expect(ledger.use('s1', '/m-open/1/file/info', now)).toBeUndefined();
    expect(ledger.use('s1', '/m-open/1/file/del', now)).toEqual({ path: '/m-open/1/file/info', peer: '' });
    now += 59_999;
    expect(ledger.use('s1', '/m-open/1/file/del', now - 59_999)).toEqual({ path: '/m-open/1/file/info', peer: '' });
    now += 2; // the window after the dateline has passed: the dateline check refuses it anyway
    expect(ledger.use('s1', '/m-open/1/file/del', now - 60_001)).toBeUndefined();
  });

  it('a dateline ahead of the clock keeps the signature until the window after that dateline', () => {
    let now = 0;
    const ledger = new SignatureLedger({ windowMs: 1_000, clock: () => now });
    ledger.use('s', '/a', 5_000);
    now = 5_500;
    expect(ledger.use('s', '/b', 5_000)).toEqual({ path: '/a', peer: '' });
    now = 6_001;
    expect(ledger.use('s', '/b', 5_000)).toBeUndefined();
  });

  it('forgets expired entries and keeps at most maxEntries', () => {
    let now = 0;
    const ledger = new SignatureLedger({ windowMs: 1_000, maxEntries: 100, clock: () => now });
    for (let i = 0; i < 250; i++) ledger.use(`s${i}`, '/a', now);
    expect(ledger.size).toBe(100);
    expect(ledger.use('s249', '/b', now)).toEqual({ path: '/a', peer: '' });
    expect(ledger.use('s0', '/b', now)).toBeUndefined(); // the oldest went first
    now = 10_000;
    ledger.use('fresh', '/a', now);
    expect(ledger.size).toBe(1);
  });
});

describe('SignatureLedger: the first use keeps its address', () => {
  it('reports the endpoint and the address of the first use, not of a later one', () => {
    const now = 1_000_000;
    const ledger = new SignatureLedger({ windowMs: 60_000, clock: () => now });
    expect(ledger.use('s', '/m-api/1/thirdparty/ent_info', now, '127.0.0.1')).toBeUndefined();
    expect(ledger.use('s', '/m-api/1/thirdparty/get_token', now, '127.0.0.2')).toEqual({ path: '/m-api/1/thirdparty/ent_info', peer: '127.0.0.1' });
    expect(ledger.use('s', '/m-api/1/thirdparty/get_token', now, '127.0.0.1')).toEqual({ path: '/m-api/1/thirdparty/ent_info', peer: '127.0.0.1' });
  });
});
