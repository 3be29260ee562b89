/** The one table of error codes against docs/service-decisions.md, both ways (fastify's errors test, in small). */
import { describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { ERROR_CODES, ErrorCode, statusOfCode } from '../../../src/shared/error-codes.js';
import { ErrorCode as ClientErrorCode } from '../../../src/api/errors.js';
import { FaultCode } from '../../../src/service/domain/fault.js';

async function decisions(): Promise<string> {
  return readFile(fileURLToPath(new URL('../../../docs/service-decisions.md', import.meta.url)), 'utf8');
}

/** The rows `| HTTP | code | meaning |` of the page's Errors section. */
function documentedOwnCodes(doc: string): Map<number, number> {
  const section = doc.slice(doc.indexOf('## Errors'), doc.indexOf('\n## ', doc.indexOf('## Errors') + 1));
  const rows = new Map<number, number>();
  for (const m of section.matchAll(/^\| (\d{3}) \| (\d{5,6}) \|/gm)) rows.set(Number(m[2]), Number(m[1]));
  return rows;
}

/** The codes of spec/decisions.md the page names ("Codes of spec/decisions.md in the same table: …"). */
function documentedSpecCodes(doc: string): number[] {
  const m = /Codes of spec\/decisions\.md in the same table: ([^.]*)/.exec(doc);
  if (!m) throw new Error('docs/service-decisions.md no longer names the codes of spec/decisions.md');
  return [...m[1]!.matchAll(/\b\d{5,6}\b/g)].map((x) => Number(x[0])).sort((a, b) => a - b);
}

describe('the error code table', () => {
  it('has each code once, and a code\'s first three digits are an HTTP error status', () => {
    const codes = Object.values(ERROR_CODES).map((e) => e.code);
    expect(new Set(codes).size).toBe(codes.length);
    for (const code of codes) expect(statusOfCode(code)).toBeGreaterThanOrEqual(400);
    for (const code of codes) expect(statusOfCode(code)).toBeLessThan(600);
  });

  it('holds exactly the codes of our own that docs/service-decisions.md tables, with their HTTP status', async () => {
    const documented = documentedOwnCodes(await decisions());
    const own = new Map(Object.values(ERROR_CODES).filter((e) => e.ours).map((e) => [e.code, statusOfCode(e.code)]));
    expect([...own.entries()].sort()).toEqual([...documented.entries()].sort());
  });

  it('holds exactly the codes of spec/decisions.md that docs/service-decisions.md names', async () => {
    const spec = Object.values(ERROR_CODES).filter((e) => !e.ours).map((e) => e.code).sort((a, b) => a - b);
    expect(spec).toEqual(documentedSpecCodes(await decisions()));
  });

  it('is the one the client and the embedded service use (40407 is a department for both)', () => {
    expect(ClientErrorCode).toBe(ErrorCode);
    expect(FaultCode).toBe(ErrorCode);
    expect(ErrorCode.DepartmentMissing).toBe(40407);
  });
});
