/** normalizeResult: `[]` stands for an empty object only where the spec's field is an object. */
import { describe, expect, it } from 'vitest';
import { normalizeResult } from '../../../src/api/normalize.js';

describe('normalizeResult', () => {
  it('reads [] as {} for the objects of a permission result and for property', () => {
    expect(normalizeResult({ members: [], groups: [] })).toEqual({ members: {}, groups: {} });
    expect(normalizeResult({ members: [] })).toEqual({ members: {} });
    expect(normalizeResult({ hash: 'h', property: '' })).toEqual({ hash: 'h', property: {} });
  });

  it('keeps the groups array of an enterprise member record, empty or not', () => {
    expect(normalizeResult({ member_id: '7', state: '1', groups: [] })).toEqual({ member_id: 7, state: 1, groups: [] });
    expect(normalizeResult({ member_id: 7, groups: [{ id: '3', name: 'Ops', group_code: '3', out_id: '' }] }))
      .toEqual({ member_id: 7, groups: [{ id: 3, name: 'Ops', group_code: '3', out_id: '' }] });
  });
});
