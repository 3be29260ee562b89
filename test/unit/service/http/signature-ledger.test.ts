/** SignatureLedger: a signature is bound to its first endpoint while its window lasts; memory stays bounded. */
import { describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignatureLedger, StoredSignatureLedger } from '../../../../src/service/http/signature-ledger.js';
import { metadataStoreAt } from '../../../../src/service/store/metadata-location.js';

describe('SignatureLedger', () => {
  it('names the other endpoint of a reused signature; the same endpoint (a retry) passes', () => {
    let now = 1_000_000;
    const ledger = new SignatureLedger({ windowMs: 60_000, clock: () => now });
    expect(ledger.useNow('s1', '/m-open/1/file/info', now)).toBeUndefined();
    expect(ledger.useNow('s1', '/m-open/1/file/info', now)).toBeUndefined();
    expect(ledger.useNow('s1', '/m-open/1/file/del', now)).toEqual({ path: '/m-open/1/file/info', peer: '' });
    now += 59_999;
    expect(ledger.useNow('s1', '/m-open/1/file/del', now - 59_999)).toEqual({ path: '/m-open/1/file/info', peer: '' });
    now += 2; // the window after the dateline has passed: the dateline check refuses it anyway
    expect(ledger.useNow('s1', '/m-open/1/file/del', now - 60_001)).toBeUndefined();
  });

  it('a dateline ahead of the clock keeps the signature until the window after that dateline', () => {
    let now = 0;
    const ledger = new SignatureLedger({ windowMs: 1_000, clock: () => now });
    ledger.useNow('s', '/a', 5_000);
    now = 5_500;
    expect(ledger.useNow('s', '/b', 5_000)).toEqual({ path: '/a', peer: '' });
    now = 6_001;
    expect(ledger.useNow('s', '/b', 5_000)).toBeUndefined();
  });

  it('forgets expired entries and keeps at most maxEntries', () => {
    let now = 0;
    const ledger = new SignatureLedger({ windowMs: 1_000, maxEntries: 100, clock: () => now });
    for (let i = 0; i < 250; i++) ledger.useNow(`s${i}`, '/a', now);
    expect(ledger.size).toBe(100);
    expect(ledger.useNow('s249', '/b', now)).toEqual({ path: '/a', peer: '' });
    expect(ledger.useNow('s0', '/b', now)).toBeUndefined(); // the oldest went first
    now = 10_000;
    ledger.useNow('fresh', '/a', now);
    expect(ledger.size).toBe(1);
  });
});

describe('SignatureLedger: the first use keeps its address', () => {
  it('reports the endpoint and the address of the first use, not of a later one', () => {
    const now = 1_000_000;
    const ledger = new SignatureLedger({ windowMs: 60_000, clock: () => now });
    expect(ledger.useNow('s', '/m-api/1/thirdparty/ent_info', now, '127.0.0.1')).toBeUndefined();
    expect(ledger.useNow('s', '/m-api/1/thirdparty/get_token', now, '127.0.0.2')).toEqual({ path: '/m-api/1/thirdparty/ent_info', peer: '127.0.0.1' });
    expect(ledger.useNow('s', '/m-api/1/thirdparty/get_token', now, '127.0.0.1')).toEqual({ path: '/m-api/1/thirdparty/ent_info', peer: '127.0.0.1' });
  });
});

describe('StoredSignatureLedger (the ledger in the metadata store)', () => {
  it('answers as the memory ledger does, for every ledger on the same store, and forgets expired rows', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cloudlib-ledger-'));
    const db = await metadataStoreAt(undefined, dir);
    try {
      let now = 1_000_000;
      const a = new StoredSignatureLedger(db, { windowMs: 60_000, clock: () => now });
      const b = new StoredSignatureLedger(db, { windowMs: 60_000, clock: () => now });
      expect(await a.use('s1', '/m-open/1/file/info', now, '10.0.0.1')).toBeUndefined();
      expect(await b.use('s1', '/m-open/1/file/info', now)).toBeUndefined(); // a retry, through the other
      expect(await b.use('s1', '/m-open/1/file/del', now, '10.0.0.2')).toEqual({ path: '/m-open/1/file/info', peer: '10.0.0.1' });
      now += 60_001;
      expect(await b.use('s1', '/m-open/1/file/del', now - 60_001)).toBeUndefined(); // expired: taken over
      expect(await a.use('s1', '/m-open/1/file/info', now)).toEqual({ path: '/m-open/1/file/del', peer: '' });
      now += 120_000;
      await a.use('fresh', '/a', now);
      expect(await db.all('SELECT sign FROM signature_uses')).toEqual([{ sign: 'fresh' }]);
    } finally {
      await db.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
