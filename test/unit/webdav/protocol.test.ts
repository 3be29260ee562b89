/** Pure parts of the WebDAV protocol layer: If header, Range, XML namespaces, Timeout, Digest, paths. */
import { describe, it, expect } from 'vitest';
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { evaluateIf, parseIfHeader, submittedTokens } from '../../../src/webdav/if-header.js';
import { parseRange } from '../../../src/webdav/byte-range.js';
import { parseXml, serializeContent, XmlBodyError } from '../../../src/webdav/xml.js';
import { parseTimeout, MAX_LOCK_TIMEOUT_S } from '../../../src/webdav/methods/lock.js';
import { Authenticator, parseAuthParams } from '../../../src/webdav/auth.js';
import { hrefOf, pathFromUrl } from '../../../src/webdav/paths.js';
import { DavError } from '../../../src/webdav/errors.js';
import { isJunkName } from '../../../src/webdav/junk-store.js';

describe('If header', () => {
  it('parses tagged and untagged lists, Not, tokens and entity tags', () => {
    expect(parseIfHeader('(<opaquelocktoken:a> ["x"]) (Not <DAV:no-lock>)')).toEqual([
      { resource: undefined, conditions: [{ not: false, token: 'opaquelocktoken:a' }, { not: false, etag: '"x"' }] },
      { resource: undefined, conditions: [{ not: true, token: 'DAV:no-lock' }] },
    ]);
    const tagged = parseIfHeader('<http://h/a> (<t1>) <http://h/b> (<t2>)');
    expect(tagged.map((l) => l.resource)).toEqual(['http://h/a', 'http://h/b']);
    expect(submittedTokens(tagged)).toEqual(['t1', 't2']);
  });
  it('refuses malformed headers with 400', () => {
    for (const bad of ['', '(', '()', '(<a>', 'x', '(<a>) <http://h/b> (<c>)', '(Not)', '([x)']) {
      expect(() => parseIfHeader(bad), bad).toThrow(DavError);
    }
  });
  it('evaluates: any list, all conditions', async () => {
    const state = async (p: string): Promise<{ etag?: string; lockTokens: string[] }> => (p === '/a' ? { etag: '"e"', lockTokens: ['t'] } : { lockTokens: [] });
    const ev = (h: string): Promise<boolean> => evaluateIf(parseIfHeader(h), '/a', (r) => new URL(r, 'http://h').pathname, state);
    expect(await ev('(<t>)')).toBe(true);
    expect(await ev('(<u>)')).toBe(false);
    expect(await ev('(<u>) (Not <DAV:no-lock>)')).toBe(true);
    expect(await ev('(<t> ["e"])')).toBe(true);
    expect(await ev('(<t> ["f"])')).toBe(false);
    expect(await ev('<http://h/b> (<t>)')).toBe(false);
  });
});

describe('Range', () => {
  it('serves one range, ignores the rest, refuses past the end', () => {
    expect(parseRange('bytes=0-9', 100)).toEqual({ kind: 'partial', start: 0, end: 9 });
    expect(parseRange('bytes=90-', 100)).toEqual({ kind: 'partial', start: 90, end: 99 });
    expect(parseRange('bytes=-10', 100)).toEqual({ kind: 'partial', start: 90, end: 99 });
    expect(parseRange('bytes=50-500', 100)).toEqual({ kind: 'partial', start: 50, end: 99 });
    expect(parseRange('bytes=0-1,5-6', 100)).toEqual({ kind: 'whole' });
    expect(parseRange('items=0-1', 100)).toEqual({ kind: 'whole' });
    expect(parseRange('bytes=9-3', 100)).toEqual({ kind: 'whole' });
    expect(parseRange('bytes=100-', 100)).toEqual({ kind: 'unsatisfiable' });
    expect(parseRange('bytes=-0', 100)).toEqual({ kind: 'unsatisfiable' });
    expect(parseRange(undefined, 100)).toEqual({ kind: 'whole' });
  });
});

describe('XML', () => {
  it('resolves namespaces whatever the prefixes, and decodes character references', () => {
    const a = parseXml('<propfind xmlns="DAV:"><prop><x:p xmlns:x="urn:x">&#x10000;&amp;</x:p></prop></propfind>');
    expect(a.children[0]!.children[0]).toMatchObject({ ns: 'urn:x', name: 'p', text: '\u{10000}&' });
    expect(serializeContent(parseXml('<v xmlns:f="bar"><f:fish a="1"/></v>'))).toBe('<fish xmlns="bar" a="1"></fish>');
  });
  it('refuses ill-formed XML, undeclared prefixes, empty prefix bindings and DOCTYPEs', () => {
    for (const bad of ['<a>', '<a><b></a>', '<p:a/>', '<a xmlns:p=""/>', '<!DOCTYPE a><a/>', '', '<a/><b/>', '<a>&#0;</a>']) {
      expect(() => parseXml(bad), bad).toThrow(XmlBodyError);
    }
  });
});

describe('Timeout, paths, junk names', () => {
  it('lock timeouts', () => {
    expect(parseTimeout(undefined)).toBe(3600);
    expect(parseTimeout('Second-60')).toBe(60);
    expect(parseTimeout('Infinite')).toBe(MAX_LOCK_TIMEOUT_S);
    expect(parseTimeout('Second-99999999999')).toBe(MAX_LOCK_TIMEOUT_S);
    expect(parseTimeout('bogus, Second-5')).toBe(5);
  });
  it('paths decode per segment and refuse dot segments and encoded slashes', () => {
    expect(pathFromUrl('/Library/a%20b/c%C3%A9?x=1')).toBe('/Library/a b/cé');
    expect(pathFromUrl('http://h:1/Library/')).toBe('/Library');
    for (const bad of ['/a/%2F', '/a/..', '/a/%2e%2e', '/a/%', 'rel', '/a/%00']) expect(() => pathFromUrl(bad), bad).toThrow(DavError);
    expect(hrefOf('/Library/a b', true)).toBe('/Library/a%20b/');
  });
  it('junk names', () => {
    for (const n of ['._x', '.DS_Store', 'Thumbs.db', 'desktop.ini', 'DESKTOP.INI']) expect(isJunkName(n)).toBe(true);
    for (const n of ['x', '.gitignore', 'thumbs.dbx']) expect(isJunkName(n)).toBe(false);
  });
});

describe('Authentication', () => {
  const md5 = (s: string): string => createHash('md5').update(s).digest('hex');
  const req = (authorization?: string, method = 'PROPFIND', url = '/x'): IncomingMessage => ({ headers: authorization ? { authorization } : {}, method, url } as IncomingMessage);
  it('Basic and Digest against the users; anonymous only when configured', () => {
    const auth = new Authenticator({ users: [{ name: 'bob', password: 'pw', opId: '7' }], anonymous: false });
    expect(auth.authenticate(req('Basic ' + Buffer.from('bob:pw').toString('base64')))).toEqual({ user: 'bob', operator: { opId: '7', opName: 'bob' }, readOnly: false });
    expect(auth.authenticate(req('Basic ' + Buffer.from('bob:no').toString('base64')))).toBeNull();
    expect(auth.authenticate(req())).toBeNull();
    const challenge = auth.challenges()[0]!;
    const nonce = parseAuthParams(challenge.slice(7)).get('nonce')!;
    const ha1 = md5('bob:cloudlib:pw');
    const ha2 = md5('PROPFIND:/x');
    const response = md5(`${ha1}:${nonce}:00000001:abc:auth:${ha2}`);
    const header = `Digest username="bob", realm="cloudlib", nonce="${nonce}", uri="/x", qop=auth, nc=00000001, cnonce="abc", response="${response}"`;
    expect(auth.authenticate(req(header))?.user).toBe('bob');
    expect(auth.authenticate(req(header.replace(response, md5('nope'))))).toBeNull();
    expect(auth.authenticate(req(header.replace(nonce, 'forged.nonce')))).toBeNull();
    expect(new Authenticator({ users: [], anonymous: { readOnly: true } }).authenticate(req())).toEqual({ user: null, readOnly: true });
  });

  const digestFor = (nonce: string, opts: { method?: string; uri: string; nc: string; password?: string }): string => {
    const ha1 = md5(`bob:cloudlib:${opts.password ?? 'pw'}`);
    const ha2 = md5(`${opts.method ?? 'GET'}:${opts.uri}`);
    const response = md5(`${ha1}:${nonce}:${opts.nc}:c1:auth:${ha2}`);
    return `Digest username="bob", realm="cloudlib", nonce="${nonce}", uri="${opts.uri}", qop=auth, nc=${opts.nc}, cnonce="c1", response="${response}"`;
  };
  const nonceOf = (auth: Authenticator): string => parseAuthParams(auth.challenges()[0]!.slice(7)).get('nonce')!;

  it('Digest is bound to the request: its uri must be the target, and a nonce count is never accepted twice', () => {
    const auth = new Authenticator({ users: [{ name: 'bob', password: 'pw' }], anonymous: false });
    const nonce = nonceOf(auth);
    const forA = digestFor(nonce, { uri: '/Library/a.txt', nc: '00000001' });
    expect(auth.authenticate(req(forA, 'GET', '/Library/a.txt'))?.user).toBe('bob');
    // The same answer for another file: refused (with a fresh count too, since the uri is signed).
    expect(auth.authenticate(req(digestFor(nonce, { uri: '/Library/a.txt', nc: '00000002' }), 'GET', '/Library/b.txt'))).toBeNull();
    // The same nonce count again: a replay.
    expect(auth.authenticate(req(forA, 'GET', '/Library/a.txt'))).toBeNull();
    expect(auth.authenticate(req(digestFor(nonce, { uri: '/Library/a.txt', nc: '00000001' }), 'GET', '/Library/a.txt'))).toBeNull();
    // A higher count goes on working; one a little behind (parallel connections) once, not twice; one far behind never.
    expect(auth.authenticate(req(digestFor(nonce, { uri: '/Library/a.txt', nc: '00000003' }), 'GET', '/Library/a.txt'))?.user).toBe('bob');
    expect(auth.authenticate(req(digestFor(nonce, { uri: '/Library/a.txt', nc: '00000002' }), 'GET', '/Library/a.txt'))?.user).toBe('bob');
    expect(auth.authenticate(req(digestFor(nonce, { uri: '/Library/a.txt', nc: '00000002' }), 'GET', '/Library/a.txt'))).toBeNull();
    expect(auth.authenticate(req(digestFor(nonce, { uri: '/Library/a.txt', nc: '000000c8' }), 'GET', '/Library/a.txt'))?.user).toBe('bob');
    expect(auth.authenticate(req(digestFor(nonce, { uri: '/Library/a.txt', nc: '00000064' }), 'GET', '/Library/a.txt'))).toBeNull();
    expect(auth.authenticate(req(digestFor(nonce, { uri: '/Library/a.txt', nc: '000000c8' }), 'GET', '/Library/a.txt'))).toBeNull();
    // The uri may be written otherwise (absolute, other escaping) as long as it names the same target.
    expect(auth.authenticate(req(digestFor(nonce, { uri: 'http://h:1/Library/%61.txt', nc: '000000c9' }), 'GET', '/Library/a.txt'))?.user).toBe('bob');
    expect(auth.authenticate(req(digestFor(nonce, { uri: '/Library/a.txt?x=1', nc: '000000ca' }), 'GET', '/Library/a.txt'))).toBeNull();
    // Without qop (no count to check) a Digest answer is refused.
    const ha2 = md5('GET:/Library/a.txt');
    const legacy = `Digest username="bob", realm="cloudlib", nonce="${nonce}", uri="/Library/a.txt", response="${md5(`${md5('bob:cloudlib:pw')}:${nonce}:${ha2}`)}"`;
    expect(auth.authenticate(req(legacy, 'GET', '/Library/a.txt'))).toBeNull();
  });

  it('an expired nonce, or one issued before a restart, with the right password is challenged again with stale=true', () => {
    let now = 1_000_000;
    const auth = new Authenticator({ users: [{ name: 'bob', password: 'pw' }], anonymous: false, nonceTtlMs: 1000, clock: () => now });
    const nonce = nonceOf(auth);
    now += 5000;
    expect(auth.check(req(digestFor(nonce, { uri: '/x', nc: '00000001' }), 'GET', '/x'))).toEqual({ principal: null, stale: true });
    // A wrong password is not stale: the user must be asked again.
    expect(auth.check(req(digestFor(nonce, { uri: '/x', nc: '00000001', password: 'no' }), 'GET', '/x'))).toEqual({ principal: null, stale: false });
    expect(auth.challenges(true)[0]).toContain('stale=true');
    // A nonce of another server instance (before a restart): stale with the right password, refused without.
    const before = new Authenticator({ users: [{ name: 'bob', password: 'pw' }], anonymous: false });
    const old = nonceOf(before);
    expect(auth.check(req(digestFor(old, { uri: '/x', nc: '00000001' }), 'GET', '/x'))).toEqual({ principal: null, stale: true });
    expect(auth.check(req(digestFor(old, { uri: '/x', nc: '00000001', password: 'no' }), 'GET', '/x'))).toEqual({ principal: null, stale: false });
    expect(auth.authenticate(req(digestFor(nonceOf(auth), { uri: '/x', nc: '00000001' }), 'GET', '/x'))?.user).toBe('bob');
  });

  it('the nonce counts kept are bounded; a forgotten nonce is answered stale, never accepted again', () => {
    const auth = new Authenticator({ users: [{ name: 'bob', password: 'pw' }], anonymous: false, maxTrackedNonces: 4 });
    const nonces = Array.from({ length: 6 }, () => nonceOf(auth));
    for (const n of nonces) expect(auth.authenticate(req(digestFor(n, { uri: '/x', nc: '00000001' }), 'GET', '/x'))?.user).toBe('bob');
    const replay = auth.check(req(digestFor(nonces[0]!, { uri: '/x', nc: '00000001' }), 'GET', '/x'));
    expect(replay.principal).toBeNull();
  });
});
