import { describe, expect, it } from 'vitest';
import { LineSplitter } from '../../../src/control/protocol.js';
import { parseExpiry, parseKeyValues, parseVerbArgs, permissionObject, renderHuman, VERBS } from '../../../src/cli/ctl.js';

describe('LineSplitter', () => {
  it('splits lines across chunks', () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l), () => lines.push('TOO LARGE'));
    s.push(Buffer.from('{"a":1}\n{"b"'));
    s.push(Buffer.from(':2}\n\n'));
    expect(lines).toEqual(['{"a":1}', '{"b":2}']);
  });
  it('refuses an oversized line once and recovers on the next', () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l), () => lines.push('TOO LARGE'), 10);
    s.push(Buffer.from('x'.repeat(8)));
    s.push(Buffer.from('y'.repeat(8)));
    s.push(Buffer.from('zzz\nok\n'));
    expect(lines).toEqual(['TOO LARGE', 'ok']);
  });
  it('keeps multi-byte characters split across chunks intact', () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l), () => {});
    const b = Buffer.from('报告\n');
    s.push(b.subarray(0, 2));
    s.push(b.subarray(2));
    expect(lines).toEqual(['报告']);
  });
});

describe('ctl argument parsing', () => {
  it('parses expiries', () => {
    expect(parseExpiry('7d', 1000)).toBe(1000 + 7 * 86400);
    expect(parseExpiry('90s', 0)).toBe(90);
    expect(parseExpiry('1795312800')).toBe(1795312800);
    expect(() => parseExpiry('soon')).toThrow(/expected a duration/);
  });
  it('parses key=value words and refuses others', () => {
    expect(parseKeyValues(['fullpath=/Demo/a b.txt', 'size=3'])).toEqual({ fullpath: '/Demo/a b.txt', size: '3' });
    expect(() => parseKeyValues(['oops'])).toThrow(/expected key=value/);
  });
  it('parses verb options', () => {
    expect(parseVerbArgs(['/a', '--expires', '7d', '--dir', '--password=x'], ['dir'])).toEqual({ pos: ['/a'], opts: { expires: '7d', dir: true, password: 'x' } });
    expect(() => parseVerbArgs(['--expires'])).toThrow(/needs a value/);
    // `--` ends the options: what follows is positional, also when it starts with '--'.
    expect(parseVerbArgs(['--library', 'L', '--', '--x', '--library'], [], new Set(['library']))).toEqual({ pos: ['--x', '--library'], opts: { library: 'L' } });
  });
  it('builds advanced permission objects and refuses unknown codes', () => {
    expect(permissionObject('dl,pv', 'rm')).toEqual({ role_id: 0, dl: 1, pv: 1, rm: -1 });
    expect(() => permissionObject('fly')).toThrow(/unknown permission code 'fly'/);
  });
  it('maps everyday verbs to methods', () => {
    expect(VERBS['perm set']!.build(['/Demo/x'], { member: 'alice', allow: 'dl,pv', deny: 'rm' })).toEqual({
      method: 'file2.set_permission',
      params: { fullpath: '/Demo/x', permissions: JSON.stringify({ accounts: ['alice'], permission: { role_id: 0, dl: 1, pv: 1, rm: -1 } }) },
    });
    expect(VERBS['tag add']!.build(['/Demo/x', 'a', 'b'], {})).toEqual({ method: 'file.add_tag', params: { fullpath: '/Demo/x', tag: 'a;b' } });
    expect(() => VERBS['tag add']!.build(['/Demo/x'], {})).toThrow(/missing TAG/);
  });
  it('renders lists as tables and records as key/value lines', () => {
    const t = renderHuman({ count: 2, list: [{ filename: 'a', filesize: 1 }, { filename: 'bb', filesize: 22 }] });
    expect(t.split('\n')[0]).toMatch(/^FILENAME\s+FILESIZE$/);
    expect(t).toContain('count: 2');
    expect(renderHuman({})).toBe('ok');
    expect(renderHuman({ org_id: 3 })).toBe('org_id  3');
  });
});
