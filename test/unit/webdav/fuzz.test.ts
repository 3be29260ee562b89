/**
 * Malformed and random requests of every shape against a live server over an in-memory Vfs: each one gets
 * an HTTP answer (no hang, no 5xx from the protocol layer itself), and the process keeps serving.
 */
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import fc from 'fast-check';
import { connect, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { startMemoryDav, type MemoryDav } from '../../support/serve-memory-dav.js';
import { dav, LOCK_BODY } from '../../support/dav-http.js';
import { waitFor } from '../../support/wait-for.js';
import { createLogger } from '../../../src/shared/log.js';

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
  // What the server says of clients that went away (the proof a cut request is done with).
  const wentAway: string[] = [];
  const log = new Writable({
    write(line: Buffer, _enc, done) {
      if (line.includes('client went away')) wentAway.push(line.toString());
      done();
    },
  });
  beforeAll(async () => {
    d = await startMemoryDav({ emptyCreateGraceMs: 0, logger: createLogger({ level: 'debug', destination: log, format: 'json' }) });
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
        // A server that neither answers nor closes fails the test.
        setTimeout(() => { resolve(`no answer and no close within 2 s (${JSON.stringify(out)})`); s.destroy(); }, 2000);
      });
      expect(answer === '' || /^HTTP\/1\.1 (4\d\d)/.test(answer), `${JSON.stringify(garbage)} → ${answer}`).toBe(true);
    }
    expect((await dav(d.url, 'PROPFIND', '/Library/', { headers: { depth: '1' } })).status).toBe(207);
  });

  it('a PUT cut off mid-body does not leave a file and the server keeps serving', async () => {
    const u = new URL(d.url);
    await new Promise<void>((resolve) => {
      const s = connect(Number(u.port), u.hostname, () => {
        s.write(`PUT /Library/cut.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Basic ${Buffer.from('alice:secret').toString('base64')}\r\nContent-Length: 100000\r\n\r\n`);
        s.write(Buffer.alloc(5000, 1), () => {
          s.destroy();
          resolve();
        });
      });
    });
    // The server is done with the PUT once it has seen its client go away.
    await waitFor('the server to see the PUT\'s client go away', () => wentAway.some((line) => line.includes('/Library/cut.bin')));
    expect((await dav(d.url, 'GET', '/Library/cut.bin')).status).toBe(404);
  });
});

/** A raw connection: what it is sent, and everything the server answers until it closes. */
function rawConnection(url: string): { socket: Socket; answer: Promise<string> } {
  const u = new URL(url);
  const socket = connect(Number(u.port), u.hostname);
  const answer = new Promise<string>((resolve) => {
    let out = '';
    socket.on('data', (c) => (out += c.toString()));
    socket.on('close', () => resolve(out));
    socket.on('error', () => resolve(out));
  });
  return { socket, answer };
}

const ALICE = `Authorization: Basic ${Buffer.from('alice:secret').toString('base64')}\r\n`;
const propertyUpdate = (props: string): string => `<D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop>${props}</D:prop></D:set></D:propertyupdate>`;

describe('hostile requests meet limits, and the server goes on serving', { timeout: 60_000 }, () => {
  let d: MemoryDav;
  beforeAll(async () => {
    d = await startMemoryDav({
      emptyCreateGraceMs: 0,
      server: {
        maxPropertiesPerResource: 100,
        maxPropertyBytesPerResource: 64 * 1024,
        maxPropertyValueBytes: 4096,
        limits: { idleTimeoutMs: 2000 },
      },
    });
    await dav(d.url, 'PUT', '/Library/f.txt', { body: 'hello' });
    await dav(d.url, 'PUT', '/Library/g.txt', { body: 'other' });
  });
  afterAll(async () => { await d?.close(); });

  it('a Digest answer for one file does not open another, and is not accepted twice', async () => {
    const challenge = String((await dav(d.url, 'GET', '/Library/f.txt', { auth: null })).headers['www-authenticate']);
    const nonce = /Digest [^]*?nonce="([^"]+)"/.exec(challenge)![1]!;
    const md5 = (s: string): string => createHash('md5').update(s).digest('hex');
    const answer = (uri: string, nc: string): string => {
      const response = md5(`${md5('alice:cloudlib:secret')}:${nonce}:${nc}:cn:auth:${md5(`GET:${uri}`)}`);
      return `Digest username="alice", realm="cloudlib", nonce="${nonce}", uri="${uri}", qop=auth, nc=${nc}, cnonce="cn", response="${response}"`;
    };
    const forF = answer('/Library/f.txt', '00000001');
    expect((await dav(d.url, 'GET', '/Library/f.txt', { auth: forF })).status).toBe(200);
    expect((await dav(d.url, 'GET', '/Library/g.txt', { auth: answer('/Library/f.txt', '00000002') })).status).toBe(401);
    expect((await dav(d.url, 'GET', '/Library/f.txt', { auth: forF })).status).toBe(401);
    expect((await dav(d.url, 'GET', '/Library/f.txt', { auth: answer('/Library/f.txt', '00000003') })).status).toBe(200);
  });

  it('20 000 dead properties in one PROPPATCH: refused (507, the rest 424) in linear time, nothing stored', async () => {
    const props = Array.from({ length: 20_000 }, (_, k) => `<Z:p${k}>value ${k}</Z:p${k}>`).join('');
    const t0 = Date.now();
    const r = await dav(d.url, 'PROPPATCH', '/Library/f.txt', { body: propertyUpdate(props) });
    // The quadratic merge took 21 s here; linear work takes a fraction of a second (bound kept loose).
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(r.status).toBe(207);
    expect(r.body).toContain('HTTP/1.1 507');
    expect(r.body).not.toContain('HTTP/1.1 200');
    const found = await dav(d.url, 'PROPFIND', '/Library/f.txt', { headers: { depth: '0' }, body: '<D:propfind xmlns:D="DAV:"><D:propname/></D:propfind>' });
    expect(found.body).not.toContain('p0');
    expect((await dav(d.url, 'OPTIONS', '/')).status).toBe(200);
  });

  it('a property value above the limit is 507 and the others in the request 424; a body above the limit is 413', async () => {
    const r = await dav(d.url, 'PROPPATCH', '/Library/f.txt', { body: propertyUpdate(`<Z:big>${'x'.repeat(5000)}</Z:big><Z:small>1</Z:small>`) });
    expect(r.status).toBe(207);
    expect(r.body).toMatch(/<big xmlns="urn:z"\/><\/D:prop><D:status>HTTP\/1.1 507/);
    expect(r.body).toMatch(/<small xmlns="urn:z"\/><\/D:prop><D:status>HTTP\/1.1 424/);
    const huge = await dav(d.url, 'PROPPATCH', '/Library/f.txt', { body: propertyUpdate(`<Z:a>${'x'.repeat(1024 * 1024 + 1)}</Z:a>`) });
    expect(huge.status).toBe(413);
  });

  it('properties are appended per change, kept private (0600 in 0700), and a resource holds no more than its limit', async () => {
    for (let k = 0; k < 40; k++) {
      const r = await dav(d.url, 'PROPPATCH', '/Library/g.txt', { body: propertyUpdate(`<Z:n${k}>${k}</Z:n${k}>`) });
      expect(r.body).toContain('HTTP/1.1 200');
    }
    const all = await dav(d.url, 'PROPFIND', '/Library/g.txt', { headers: { depth: '0' }, body: '<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>' });
    for (let k = 0; k < 40; k++) expect(all.body).toContain(`<n${k} xmlns="urn:z">${k}</n${k}>`);
    const dir = join(d.dataDir, 'properties');
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    const files = (await readdir(dir)).filter((f) => f.endsWith('.json'));
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) expect((await stat(join(dir, f))).mode & 0o777).toBe(0o600);
    // One snapshot line, then one line per change: nothing rewritten per change.
    const logs = await Promise.all(files.map((f) => readFile(join(dir, f), 'utf8')));
    expect(Math.max(...logs.map((t) => t.trim().split('\n').length))).toBeGreaterThan(30);
    // 40 held; 61 more would make 101 (limit 100): refused, nothing added.
    const more = Array.from({ length: 61 }, (_, k) => `<Z:m${k}>${k}</Z:m${k}>`).join('');
    const over = await dav(d.url, 'PROPPATCH', '/Library/g.txt', { body: propertyUpdate(more) });
    expect(over.body).toContain('HTTP/1.1 507');
    expect((await dav(d.url, 'PROPFIND', '/Library/g.txt', { headers: { depth: '0' }, body: '<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>' })).body).not.toContain('<m0 ');
    // The lock table is private too.
    await dav(d.url, 'LOCK', '/Library/g.txt', { body: LOCK_BODY() });
    await d.server.close().catch(() => undefined);
    expect((await stat(join(d.dataDir, 'locks.json'))).mode & 0o777).toBe(0o600);
    d = await startMemoryDav({ emptyCreateGraceMs: 0, server: { limits: { idleTimeoutMs: 2000 } } });
    await dav(d.url, 'PUT', '/Library/f.txt', { body: 'hello' });
  });

  it('COPY and MOVE to a Destination on another server: 502, nothing done', async () => {
    for (const method of ['COPY', 'MOVE']) {
      const r = await dav(d.url, method, '/Library/f.txt', { headers: { destination: 'http://elsewhere.example/Library/x.txt' } });
      expect(r.status).toBe(502);
    }
    expect((await dav(d.url, 'GET', '/Library/x.txt')).status).toBe(404);
    expect((await dav(d.url, 'GET', '/Library/f.txt')).status).toBe(200);
    // The same server named in full is fine.
    const u = new URL(d.url);
    expect((await dav(d.url, 'COPY', '/Library/f.txt', { headers: { destination: `http://${u.host}/Library/x.txt` } })).status).toBe(201);
  });

  it('a request body that stops arriving is cut (408) after the idle timeout', async () => {
    const { socket, answer } = rawConnection(d.url);
    socket.write(`PUT /Library/stalled.bin HTTP/1.1\r\nHost: x\r\n${ALICE}Content-Length: 1000\r\n\r\n`);
    socket.write(Buffer.alloc(10, 1));
    const out = await answer;
    expect(out).toMatch(/^HTTP\/1\.1 408/);
    expect((await dav(d.url, 'OPTIONS', '/')).status).toBe(200);
  });

  it('headers that never finish arriving are cut (408) after the header timeout, however slowly they trickle', async () => {
    const e = await startMemoryDav({ server: { limits: { headersTimeoutMs: 500, idleTimeoutMs: 30_000 } } });
    try {
      const { socket, answer } = rawConnection(e.url);
      socket.write('GET /Library/ HTTP/1.1\r\nHost: x\r\n');
      // One header byte every 100 ms: the connection is never idle, the headers never end.
      const drip = setInterval(() => { if (!socket.destroyed) socket.write('X'); }, 100);
      try {
        expect(await answer).toMatch(/^HTTP\/1\.1 408/);
      } finally {
        clearInterval(drip);
      }
      expect((await dav(e.url, 'OPTIONS', '/')).status).toBe(200);
    } finally {
      await e.close();
    }
  });

  it('a connection that sends nothing is closed; one client holds a bounded number of connections (503 beyond)', async () => {
    const idle = rawConnection(d.url);
    expect(await idle.answer).toBe('');
    // A server whose idle timeout does not end the connections held below while the test runs.
    const e = await startMemoryDav({ server: { limits: { idleTimeoutMs: 120_000, maxConnectionsPerClient: 6 } } });
    try {
      const held = Array.from({ length: 6 }, () => rawConnection(e.url));
      for (const h of held) h.socket.write(`PUT /Library/slow.bin HTTP/1.1\r\nHost: x\r\n${ALICE}Content-Length: 1000\r\n\r\n`);
      // Connected (in the listen queue, which the server accepts from in order) before the seventh is opened.
      await Promise.all(held.map((h) => new Promise<void>((resolve) => (h.socket.readyState === 'open' ? resolve() : h.socket.once('connect', () => resolve())))));
      const extra = rawConnection(e.url);
      expect(await extra.answer).toMatch(/^HTTP\/1\.1 503/);
      for (const h of held) h.socket.destroy();
      await Promise.all(held.map((h) => h.answer));
      // The slots are free again.
      expect((await dav(e.url, 'OPTIONS', '/')).status).toBe(200);
    } finally {
      await e.close();
    }
  });

  it('If-Match and If-None-Match of a PUT are checked against the service, not a cache older than another client\'s change', async () => {
    expect((await dav(d.url, 'PUT', '/Library/s.txt', { body: 'first' })).status).toBe(201);
    await d.vfs.flushAll();
    const before = (await dav(d.url, 'GET', '/Library/s.txt')).headers.etag as string;
    expect(before).toBe(`"${createHash('sha1').update('first').digest('hex')}"`);
    // Another client changes the file on the service; this gateway's cache has not seen it yet.
    d.remotes.get('Library')!.putFile('s.txt', Buffer.from('changed elsewhere'));
    expect((await dav(d.url, 'GET', '/Library/s.txt')).headers.etag).toBe(before);
    expect((await dav(d.url, 'PUT', '/Library/s.txt', { body: 'mine', headers: { 'if-match': before } })).status).toBe(412);
    const now = `"${createHash('sha1').update('changed elsewhere').digest('hex')}"`;
    expect((await dav(d.url, 'PUT', '/Library/s.txt', { body: 'mine', headers: { 'if-none-match': now } })).status).toBe(412);
    d.remotes.get('Library')!.putFile('t.txt', Buffer.from('made elsewhere'));
    expect((await dav(d.url, 'PUT', '/Library/t.txt', { body: 'mine', headers: { 'if-none-match': '*' } })).status).toBe(412);
    // The If header's entity tags on a change too (RFC 4918 §10.4).
    expect((await dav(d.url, 'PUT', '/Library/s.txt', { body: 'mine', headers: { if: `([${before}])` } })).status).toBe(412);
    expect((await dav(d.url, 'PROPPATCH', '/Library/s.txt', { headers: { if: `([${before}])` }, body: propertyUpdate('<Z:a>1</Z:a>') })).status).toBe(412);
    expect((await dav(d.url, 'PUT', '/Library/s.txt', { body: 'mine', headers: { 'if-match': now } })).status).toBe(204);
    expect((await dav(d.url, 'GET', '/Library/s.txt')).body).toBe('mine');
  });
});
