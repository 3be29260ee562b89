import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { closeRecordEntry, decodeCloseRecord, decodeCloseRecords, encodeCloseRecord, readCloseRecords, type EngineCloseRecord } from '../../../../src/vfs/write-back/engine-close-record.js';
import { loadFuse3Binding } from '../../../../src/fuse/engine/binding.js';

/**
 * Golden close records (test/fixtures/engine-close-records): the engine's encoder (C, through the addon)
 * writes them byte for byte, and the journal's codec (TypeScript) decodes them to the records they were
 * made from. A change of the format on either side fails one of these.
 */
const FIXTURES = fileURLToPath(new URL('../../../fixtures/engine-close-records/', import.meta.url));

interface FixtureRecord { id: string; library: string; fullpath: string; mtimeNs: string; createdMs: number; seq: number; data: string; sha1: string }
interface Fixtures {
  records: Record<string, FixtureRecord>;
  files: Record<string, { whole: string[]; cut?: { record: string; bytes: number } }>;
}

const fixtures = JSON.parse(readFileSync(join(FIXTURES, 'records.json'), 'utf8')) as Fixtures;

function fields(name: string): Omit<EngineCloseRecord, 'sha1'> {
  const r = fixtures.records[name]!;
  return { id: r.id, library: r.library, fullpath: r.fullpath, mtimeNs: BigInt(r.mtimeNs), createdMs: r.createdMs, seq: r.seq, data: Buffer.from(r.data, 'base64') };
}

function expected(name: string): EngineCloseRecord {
  return { ...fields(name), sha1: fixtures.records[name]!.sha1 };
}

const fileNames = Object.keys(fixtures.files);

describe('engine close records: the engine writes the golden records byte for byte', () => {
  const binding = loadFuse3Binding();
  const engineEncode = (name: string): Buffer => binding.encodeCloseRecord(fields(name));

  it.each(fileNames)('%s', (file) => {
    const { whole, cut } = fixtures.files[file]!;
    const parts = whole.map(engineEncode);
    if (cut) parts.push(engineEncode(cut.record).subarray(0, cut.bytes));
    expect(Buffer.concat(parts).equals(readFileSync(join(FIXTURES, file)))).toBe(true);
  });

  it('the codec\'s own encoder (the tests\' writer of side logs) writes the same bytes', () => {
    for (const name of Object.keys(fixtures.records)) expect(encodeCloseRecord(fields(name)).equals(binding.encodeCloseRecord(fields(name)))).toBe(true);
  });

  it('refuses a field that does not fit the format, rather than write a record that would not read back', () => {
    expect(() => binding.encodeCloseRecord({ ...fields('ascii'), data: Buffer.alloc(64 * 1024 + 1) })).toThrow(/does not fit/);
    expect(() => binding.encodeCloseRecord({ ...fields('ascii'), id: 'not-an-id' })).toThrow(/does not fit/);
    expect(() => binding.encodeCloseRecord({ ...fields('ascii'), fullpath: 'p'.repeat(65_536) })).toThrow(/does not fit/);
  });
});

describe('engine close records: the journal\'s codec decodes the golden records', () => {
  it.each(fileNames)('%s', async (file) => {
    const want = fixtures.files[file]!.whole.map(expected);
    const read: EngineCloseRecord[] = [];
    for await (const r of readCloseRecords(join(FIXTURES, file))) read.push(r);
    expect(read).toEqual(want);
    if (want.length === 1 && !fixtures.files[file]!.cut) expect(decodeCloseRecord(readFileSync(join(FIXTURES, file)))).toEqual(want[0]);
  });

  it('a record decodes to the journal entry of the version it closed (a non-ASCII path, an empty file)', () => {
    const bytes = readFileSync(join(FIXTURES, 'non-ascii.ecr'));
    expect(closeRecordEntry(decodeCloseRecord(bytes)!)).toEqual({
      id: 'fedcba9876543210', library: 'Bibliothèque', fullpath: 'dossier/été "q"\\ñ 日本.txt', size: 256, mtimeMs: 1764390001000,
      createdMs: 1764390001000, seq: 1764390001000002, sha1: fixtures.records['non-ascii']!.sha1,
    });
    expect(closeRecordEntry(decodeCloseRecord(readFileSync(join(FIXTURES, 'empty.ecr')))!)).toMatchObject({ size: 0, sha1: 'da39a3ee5e6b4b0d3255bfef95601890afd80709' });
  });

  it('a record with any byte changed, or cut short, or with bytes after it, is not one record', () => {
    const bytes = readFileSync(join(FIXTURES, 'ascii.ecr'));
    for (let at = 0; at < bytes.length; at++) {
      const changed = Buffer.from(bytes);
      changed[at]! ^= 0x10;
      expect(decodeCloseRecord(changed)).toBeUndefined();
    }
    for (let n = 0; n < bytes.length; n++) expect(decodeCloseRecord(bytes.subarray(0, n))).toBeUndefined();
    expect(decodeCloseRecord(Buffer.concat([bytes, Buffer.from([0])]))).toBeUndefined();
  });

  it('a record cut short in the middle of a log is skipped and the records after it are read; read in pieces of any size, the same records come', async () => {
    const [a, b, c] = ['ascii', 'non-ascii', 'empty'].map((n) => encodeCloseRecord(fields(n)));
    const log = Buffer.concat([a!, b!.subarray(0, 150), c!, b!, Buffer.from('ECR')]);
    expect(decodeCloseRecords(log, true).records.map((r) => r.id)).toEqual(['0123456789abcdef', '00000000000000ff', 'fedcba9876543210']);
    // In pieces: what a piece ends in waits for the next one.
    for (const piece of [1, 7, 100]) {
      const ids: string[] = [];
      let pending = Buffer.alloc(0);
      for (let at = 0; at < log.length; at += piece) {
        const buf = Buffer.concat([pending, log.subarray(at, at + piece)]);
        const final = at + piece >= log.length;
        const { records, rest } = decodeCloseRecords(buf, final);
        ids.push(...records.map((r) => r.id));
        pending = buf.subarray(buf.length - rest);
      }
      expect(ids).toEqual(['0123456789abcdef', '00000000000000ff', 'fedcba9876543210']);
    }
    const dir = await mkdtemp(join(tmpdir(), 'close-records-'));
    try {
      await writeFile(join(dir, 'closes.log'), log);
      const read: string[] = [];
      for await (const r of readCloseRecords(join(dir, 'closes.log'))) read.push(r.id);
      expect(read).toEqual(['0123456789abcdef', '00000000000000ff', 'fedcba9876543210']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
