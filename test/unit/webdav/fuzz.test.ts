/**
 * Malformed and random requests of every shape against a live server over an in-memory Vfs: each one gets
 * an HTTP answer (no hang, no 5xx from the protocol layer itself), and the process keeps serving.
 */
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import fc from 'fast-check';
import { connect } from 'node:net';
import { startMemoryDav, type MemoryDav } from '../../e2e/webdav/serve-memory.js';
import { dav } from '../../e2e/webdav/http.js';

const methods = ['GET', 'HEAD', 'PUT', 'DELETE', 'MKCOL', 'COPY', 'MOVE', 'PROPFIND', 'PROPPATCH', 'LOCK', 'UNLOCK', 'OPTIONS', 'POST', 'BREW'];
const paths = fc.oneof(
  fc.constantFrom('/', '/Library', '/Library/', '/Library/f.txt', '/Library/d/', '/Library/%', '/Library/%2F..', '/Library/a%00b', '/Nope/x', '/Library/._x', '/Library/d/f'),
  fc.string({ maxLength: 30 }).map((s) => '/Library/' + encodeURIComponent(s)),
);
const xmlish = fc.oneof(
  fc.constantFrom(
    '', '<', '<D:propfind xmlns:D="DAV:">', '<D:propfind xmlns:D="DAV:"><D:prop><x:y/></D:prop></D:propfind>',
    '<?xml version="1.0"?><!DOCTYPE a [<!ENTITY e "x">]><a>&e;</a>',
    '<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>',
    '<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Z:a xmlns:Z="z">1</Z:a></D:prop></D:set><D:set><D:prop><Z:b xmlns:Z="z">2</Z:b></D:prop></D:set></D:propertyupdate>',
    '<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><D:getetag>x</D:getetag></D:prop></D:set></D:propertyupdate>',
    '<a>&#xD800;</a>', '<a xmlns:p=""><p:b/></a>', '<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>',
  ),
  fc.string({ maxLength: 200 }),
);
const headerValues = fc.oneof(fc.string({ maxLength: 60 }).map((s) => s.replace(/[\r\n]/g, '')), fc.constantFrom(
  '(<opaquelocktoken:x>)', '<http://x/y> (Not <DAV:no-lock>)', '(', '<', '([', '(Not)', 'bytes=5-1', 'bytes=-0', 'bytes=0-,1-2', 'infinity', '1', 'Second-abc', 'Infinite, Second-4100000000',
  'http://127.0.0.1/Library/g.txt', '/Library/d/sub', '<opaquelocktoken:nope>', 'F', 'T', '"etag"',
));
const headerNames = fc.constantFrom('if', 'depth', 'range', 'if-range', 'destination', 'overwrite', 'lock-token', 'timeout', 'if-match', 'if-none-match', 'content-range');

describe('fuzz: malformed requests never take the server down', { timeout: 60_000 }, () => {
  let d: MemoryDav;
  beforeAll(async () => {
    d = await startMemoryDav({ emptyCreateGraceMs: 0 });
    await dav(d.url, 'MKCOL', '/Library/d/');
    await dav(d.url, 'PUT', '/Library/f.txt', { body: 'hello' });
  });
  afterAll(async () => { await d?.close(); });

  it('answers every generated request with an HTTP status', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...methods), paths, fc.array(fc.tuple(headerNames, headerValues), { maxLength: 4 }), xmlish, async (method, path, headers, body) => {
        const r = await dav(d.url, method, path, { headers: Object.fromEntries(headers), body });
        expect(r.status).toBeGreaterThanOrEqual(200);
        expect(r.status).toBeLessThan(600);
        // Protocol-level failures are the client's (4xx); 5xx only for the Vfs failing, which it does not here.
        expect(r.status === 500, `${method} ${path} ${JSON.stringify(headers)} → ${r.status} ${r.body}`).toBe(false);
      }),
      { numRuns: 400 },
    );
    expect((await dav(d.url, 'OPTIONS', '/')).status).toBe(200);
  });

  it('garbage on the socket gets 400 and the server keeps serving', async () => {
    for (const garbage of ['\x00\x01\x02\r\n\r\n', 'PROPFIND / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n', 'GET /%%% HTTP/9.9\r\n\r\n', 'PUT /Library/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n']) {
      const u = new URL(d.url);
      const answer = await new Promise<string>((resolve) => {
        const s = connect(Number(u.port), u.hostname, () => s.end(garbage));
        let out = '';
        s.on('data', (c) => (out += c.toString()));
        s.on('close', () => resolve(out));
        s.on('error', () => resolve(out));
        setTimeout(() => s.destroy(), 2000);
      });
      expect(answer === '' || /^HTTP\/1\.1 (4\d\d)/.test(answer)).toBe(true);
    }
    expect((await dav(d.url, 'PROPFIND', '/Library/', { headers: { depth: '1' } })).status).toBe(207);
  });

  it('a PUT cut off mid-body does not leave a file and the server keeps serving', async () => {
    const u = new URL(d.url);
    await new Promise<void>((resolve) => {
      const s = connect(Number(u.port), u.hostname, () => {
        s.write(`PUT /Library/cut.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Basic ${Buffer.from('alice:secret').toString('base64')}\r\nContent-Length: 100000\r\n\r\n`);
        s.write(Buffer.alloc(5000, 1));
        setTimeout(() => { s.destroy(); resolve(); }, 100);
      });
    });
    await new Promise((r) => setTimeout(r, 200));
    expect((await dav(d.url, 'GET', '/Library/cut.bin')).status).toBe(404);
  });
});
