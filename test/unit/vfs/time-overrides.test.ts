/**
 * TimeOverrides: the times programs saw are kept in a file and hold across restarts; records made in a
 * burst are appended together; the file is compacted when it grows past its bound.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TimeOverrides } from '../../../src/vfs/time-overrides.js';
import { silentLogger } from '../../../src/shared/log.js';

let dir = '';
afterEach(async () => { if (dir) await rm(dir, { recursive: true, force: true }); });

describe('time overrides', () => {
  it('a burst of records is kept whole across a restart, each for its version only', async () => {
    dir = await mkdtemp(join(tmpdir(), 'cloudlib-times-'));
    const file = join(dir, 'times.jsonl');
    const a = new TimeOverrides(file, silentLogger);
    await a.load();
    for (let i = 0; i < 500; i++) a.set('A', `id${i}`, `v${i}`, 1_700_000_000_000 + i);
    a.set('A', 'id0', 'v0b', 42); // a newer version of the first: the last record wins
    await a.close();
    expect((await readFile(file, 'utf8')).split('\n').filter(Boolean)).toHaveLength(501);
    const b = new TimeOverrides(file, silentLogger);
    await b.load();
    expect(b.get('A', 'id0', 'v0b')).toBe(42);
    expect(b.get('A', 'id0', 'v0')).toBeUndefined();
    for (let i = 1; i < 500; i++) expect(b.get('A', `id${i}`, `v${i}`)).toBe(1_700_000_000_000 + i);
    await b.close();
  });

  it('past its bound the file is compacted to the records held', async () => {
    dir = await mkdtemp(join(tmpdir(), 'cloudlib-times-'));
    const file = join(dir, 'times.jsonl');
    const a = new TimeOverrides(file, silentLogger, 10);
    await a.load();
    for (let i = 0; i < 25; i++) a.set('A', 'same', `v${i}`, i);
    await a.close();
    const b = new TimeOverrides(file, silentLogger, 10);
    await b.load();
    expect(b.get('A', 'same', 'v24')).toBe(24);
    await b.close();
    expect((await readFile(file, 'utf8')).split('\n').filter(Boolean).length).toBeLessThanOrEqual(10);
  });
});
