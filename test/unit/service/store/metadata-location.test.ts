import { describe, expect, it } from 'vitest';
import { parseMetadataUrl } from '../../../../src/service/store/metadata-location.js';

describe('--metadata', () => {
  it('takes postgresql://USER@HOST:PORT/DB; refuses a password in the URL without repeating it, and other URLs', () => {
    expect(parseMetadataUrl('postgresql://cloudlib@127.0.0.1:5432/cloudlib')).toBe('postgresql://cloudlib@127.0.0.1:5432/cloudlib');
    expect(parseMetadataUrl('postgres://cloudlib@db/cloudlib')).toBe('postgres://cloudlib@db/cloudlib');
    expect(() => parseMetadataUrl('postgresql://cloudlib:hunter2@db/cloudlib')).toThrow(/PGPASSWORD/);
    try {
      parseMetadataUrl('postgresql://cloudlib:hunter2@db/cloudlib');
    } catch (err) {
      expect((err as Error).message).not.toContain('hunter2');
    }
    expect(() => parseMetadataUrl('sqlite:///tmp/x.db')).toThrow(/expected postgresql:\/\//);
    expect(() => parseMetadataUrl('postgresql://cloudlib@db')).toThrow(/database name required/);
    expect(() => parseMetadataUrl('not a url')).toThrow(/expected postgresql:\/\//);
  });
});
