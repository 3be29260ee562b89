import { describe, expect, it } from 'vitest';
import { isTransient } from '../../../src/shared/transient.js';
import { ServiceError } from '../../../src/api/errors.js';
import { VfsError } from '../../../src/vfs/types.js';

const answer = (status: number, code = 0) => new ServiceError({ status, code, message: 'x', endpoint: 'file.ls' });
const noAnswer = (transportCode: string) => new ServiceError({ status: 0, code: 0, message: 'x', endpoint: 'file.ls', transport: true, transportCode });

describe('isTransient', () => {
  it('no answer, a busy or failing service: transient', () => {
    for (const e of [noAnswer('ECONNRESET'), noAnswer('ETIMEDOUT'), answer(429), answer(500), answer(502), answer(503, 50301), answer(504)]) expect(isTransient(e)).toBe(true);
    expect(isTransient(Object.assign(new Error('reset'), { code: 'UND_ERR_SOCKET' }))).toBe(true);
  });

  it('a refusal of the service (4xx), a 501, an abort, EACCES / ENOSPC / ENOENT: permanent', () => {
    for (const e of [answer(400, 40003), answer(403, 40310), answer(403, 40321), answer(404, 40402), answer(409), answer(423), answer(501)]) expect(isTransient(e)).toBe(false);
    for (const code of ['EACCES', 'ENOSPC', 'ENOENT', 'EINVAL', 'EROFS'] as const) expect(isTransient(new VfsError(code, 'x'))).toBe(false);
    expect(isTransient(new DOMException('gone', 'AbortError'))).toBe(false);
  });

  it('reads through causes: an EIO carrying a 403 is permanent, one carrying a reset transient', () => {
    expect(isTransient(new VfsError('EIO', 'x', { cause: answer(403) }))).toBe(false);
    expect(isTransient(new VfsError('EIO', 'x', { cause: noAnswer('ECONNRESET') }))).toBe(true);
    expect(isTransient(new VfsError('EAGAIN', 'x', { cause: answer(503) }))).toBe(true);
  });
});
