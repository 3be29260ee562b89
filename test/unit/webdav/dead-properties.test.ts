/** DeadPropertyStore: the per-object log (snapshot, appended changes, compaction), limits, path → id. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { appendFile, mkdtemp, readdir, readFile, rm, stat, writeFile, mkdir } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeadPropertyStore, PropertyLimitError, type DeadProperty } from '../../../src/webdav/dead-properties.js';

let dir: string;
beforeEach(async () => { dir = await mkdtemp(join(tmpdir(), 'cloudlib-props-')); });
afterEach(async () => { await rm(dir, { recursive: true, force: true }); });

const prop = (name: string, xml: string): DeadProperty => ({ ns: 'urn:z', name, xml });
const fileOf = (key: string): string => join(dir, 'properties', createHash('sha256').update(key).digest('hex') + '.json');
const obj = { id: 'f1', path: '/L/a.txt' };

describe('DeadPropertyStore', () => {
  it('appends one line per change, compacts when the log doubles, and reads back the same after a restart', async () => {
    const store = new DeadPropertyStore(dir);
    await store.update(obj, [prop('keep', 'k')], []);
    for (let k = 0; k < 300; k++) await store.update(obj, [prop('n', `value ${k} ${'x'.repeat(1000)}`)], []);
    const text = await readFile(fileOf('id:f1'), 'utf8');
    // Live content is about 1 KB: the log never grew far past twice that plus the slack.
    expect(Buffer.byteLength(text)).toBeLessThan(2 * 1100 + 64 * 1024 + 2000);
    expect(text.trim().split('\n').length).toBeGreaterThan(1);
    await store.update(obj, [], [{ ns: 'urn:z', name: 'keep' }]);
    const again = new DeadPropertyStore(dir);
    expect(await again.get(obj)).toEqual([prop('n', `value 299 ${'x'.repeat(1000)}`)]);
    expect((await stat(fileOf('id:f1'))).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, 'properties'))).mode & 0o777).toBe(0o700);
  });

  it('reads the one-snapshot files of earlier versions, and ignores a torn last line', async () => {
    await mkdir(join(dir, 'properties'));
    await writeFile(fileOf('id:f1'), JSON.stringify({ key: 'id:f1', props: [prop('old', '1')] }));
    await appendFile(fileOf('id:f1'), '\n{"key":"id:f1","set":[{"ns":"urn:z","name":"torn","xml":"');
    const store = new DeadPropertyStore(dir);
    expect(await store.get(obj)).toEqual([prop('old', '1')]);
    expect(await store.update(obj, [prop('new', '2')], [])).toEqual([prop('old', '1'), prop('new', '2')]);
    expect(await new DeadPropertyStore(dir).get(obj)).toEqual([prop('old', '1'), prop('new', '2')]);
  });

  it('refuses an update past the limits and changes nothing', async () => {
    const store = new DeadPropertyStore(dir, { maxPerObject: 3, maxBytesPerObject: 100 });
    await store.update(obj, [prop('a', '1'), prop('b', '2')], []);
    await expect(store.update(obj, [prop('c', '3'), prop('d', '4')], [])).rejects.toThrow(PropertyLimitError);
    await expect(store.update(obj, [prop('c', 'x'.repeat(200))], [])).rejects.toThrow(PropertyLimitError);
    // Replacing and removing within the limits is fine.
    expect(await store.update(obj, [prop('c', '3')], [{ ns: 'urn:z', name: 'a' }])).toEqual([prop('b', '2'), prop('c', '3')]);
    expect(await new DeadPropertyStore(dir).get(obj)).toEqual([prop('b', '2'), prop('c', '3')]);
  });

  it('properties set before an object had an id move to its id; those set under the id since are newer and win', async () => {
    const store = new DeadPropertyStore(dir);
    await store.update({ path: '/L/a.txt' }, [prop('a', 'by path'), prop('b', 'by path')], []);
    await store.update(obj, [prop('a', 'by id')], []);
    expect(await store.get(obj)).toEqual([prop('b', 'by path'), prop('a', 'by id')]);
    expect((await readdir(join(dir, 'properties'))).filter((f) => f.endsWith('.json'))).toEqual([fileOf('id:f1').split('/').pop()]);
  });
});
