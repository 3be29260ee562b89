/** Every error code the service answers is written down in docs/service-decisions.md (fastify's errors test, in small). */
import { describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { FaultCode } from '../../../src/service/domain/fault.js';

describe('FaultCode against the docs', () => {
  it('each code appears in docs/service-decisions.md, and its first three digits are an HTTP status', async () => {
    const doc = await readFile(fileURLToPath(new URL('../../../docs/service-decisions.md', import.meta.url)), 'utf8');
    const missing = Object.entries(FaultCode).filter(([, code]) => !new RegExp(`\\b${code}\\b`).test(doc)).map(([name, code]) => `${name} ${code}`);
    expect(missing).toEqual([]);
    for (const code of Object.values(FaultCode)) expect(Number(String(code).slice(0, 3))).toBeGreaterThanOrEqual(400);
  });
});
