import { describe, expect, it } from 'vitest';
import { sign, signingString, signatureVariants } from '../../../src/shared/sign.js';

const secret = 'k3Jd9QpXv2LmTz8RwYb4Nc';

describe('signature (spec/signature.md vectors)', () => {
  it('signs a library file call with non-ASCII values', () => {
    const p = { org_client_id: 'oc_5f2a9d1e', dateline: 1795312800, fullpath: '报告/2026 Q3 summary.docx', op_name: 'Ana' };
    expect(signingString(p)).toBe('1795312800\n报告/2026 Q3 summary.docx\nAna\noc_5f2a9d1e');
    expect(sign(secret, p)).toBe('BAyOov/71NuX3WIdXAyXoUVZbTU=');
  });
  it('leaves filehash and filesize out on create_file', () => {
    const p = { org_client_id: 'oc_5f2a9d1e', dateline: 1795312800, fullpath: 'a.txt', filehash: 'da39a3ee5e6b4b0d3255bfef95601890afd80709', filesize: 0, overwrite: 1 };
    const opts = { exclude: ['filehash', 'filesize'] };
    expect(signingString(p, opts)).toBe('1795312800\na.txt\noc_5f2a9d1e\n1');
    expect(sign(secret, p, opts)).toBe('G9YRWqFBpYoaoZHa1GT1jzGRoaU=');
    expect(signatureVariants(secret, p, '/m-open/1/file/create_file')).toContain('G9YRWqFBpYoaoZHa1GT1jzGRoaU=');
  });
  it('signs an enterprise call', () => {
    const p = { client_id: 'ent_7c1b', dateline: 1795312800, org_name: 'Design', org_capacity: -1 };
    expect(signingString(p)).toBe('ent_7c1b\n1795312800\n-1\nDesign');
    expect(sign(secret, p)).toBe('gptQ3PBDwEqZ+ig9SwKi9V74w00=');
  });
  it('never signs the sign parameter itself', () => {
    const p = { a: 'x', sign: 'whatever' };
    expect(signingString(p)).toBe('x');
  });
});
