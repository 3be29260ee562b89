import { describe, expect, it } from 'vitest';
import { fsErrorOf } from '../../../src/vfs/fs-errors.js';

describe('local disk errors as Vfs errors', () => {
  it('a full disk is ENOSPC, a size past what the disk holds EFBIG (a truncate to petabytes), the rest EIO', () => {
    const err = (code: string): Error => Object.assign(new Error(`${code}: from the disk`), { code });
    expect(fsErrorOf(err('ENOSPC'), 'writing').code).toBe('ENOSPC');
    expect(fsErrorOf(err('EDQUOT'), 'writing').code).toBe('ENOSPC');
    expect(fsErrorOf(err('EFBIG'), 'truncating to 999999999999999').code).toBe('EFBIG');
    expect(fsErrorOf(err('EMFILE'), 'opening').code).toBe('EIO');
  });
});
