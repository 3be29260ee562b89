import { describe, expect, it } from 'vitest';
import { tuneGarbageCollector } from '../../../src/shared/gc-tuning.js';

describe('tuneGarbageCollector', () => {
  it('makes marking atomic unless CLOUDLIB_INCREMENTAL_GC=1 keeps the default', () => {
    expect(tuneGarbageCollector({ CLOUDLIB_INCREMENTAL_GC: '1' })).toBe(false);
    expect(tuneGarbageCollector({})).toBe(true);
  });
});
