/**
 * AuthorizationCache: an entry is only handed out while the latest epoch seen is the one it was read at;
 * a later epoch drops every entry, an entry read at an older epoch is not kept, and the number of
 * entries stays within its bound, the oldest filled dropped first.
 */
import { describe, expect, it } from 'vitest';
import { AuthorizationCache, type LibraryAuthorization } from '../../../../src/service/http/authorization-cache.js';
import type { LibraryRow } from '../../../../src/service/domain/directory.js';

function found(orgClientId: string, epoch: number): LibraryAuthorization {
  return {
    auth: { org_client_id: orgClientId, org_client_secret: 's', library_id: 1, ent_client_id: 'e', title: 't' },
    library: { id: 1, ent_id: 1 } as LibraryRow,
    term: null,
    epoch,
  };
}

describe('AuthorizationCache', () => {
  it('hands out an entry only at the epoch it was read at', () => {
    const cache = new AuthorizationCache();
    cache.put('oc_a', found('oc_a', 3));
    expect(cache.get('oc_a')?.epoch).toBe(3);
    cache.observe(3);
    expect(cache.get('oc_a')?.epoch).toBe(3);
    cache.observe(4);
    expect(cache.get('oc_a')).toBeUndefined();
    expect(cache.size).toBe(0);
    // read before the epoch moved: not kept
    cache.put('oc_a', found('oc_a', 3));
    expect(cache.get('oc_a')).toBeUndefined();
    // a read at a later epoch than seen moves it
    cache.put('oc_b', found('oc_b', 5));
    expect(cache.get('oc_b')?.epoch).toBe(5);
  });

  it('keeps at most its bound, dropping the oldest filled', () => {
    const cache = new AuthorizationCache(3);
    for (const id of ['oc_1', 'oc_2', 'oc_3', 'oc_4']) cache.put(id, found(id, 0));
    expect(cache.size).toBe(3);
    expect(cache.get('oc_1')).toBeUndefined();
    expect(['oc_2', 'oc_3', 'oc_4'].map((id) => cache.get(id)?.auth.org_client_id)).toEqual(['oc_2', 'oc_3', 'oc_4']);
    // filled again: the same entry replaced, nothing else dropped
    cache.put('oc_2', found('oc_2', 0));
    expect(cache.size).toBe(3);
  });
});
