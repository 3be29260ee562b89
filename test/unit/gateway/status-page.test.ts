/** The admin status page's HTML: every value escaped, libraries online/offline, uploads with progress, recent problems. */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, RecentProblems } from '../../../src/shared/log.js';
import { statusPage, type StatusPageModel } from '../../../src/gateway/status-page.js';

const now = Date.UTC(2026, 0, 1, 12, 0, 0);
function model(over: Partial<StatusPageModel> = {}): StatusPageModel {
  return {
    describe: { service_url: 'http://127.0.0.1:1', embedded_service: true, webdav_url: 'http://127.0.0.1:8080/', mount: null, control_socket: '/d/control.sock', uptime_s: 90 },
    status: {
      uploads: [{ id: 'u1', library: 'Library', fullpath: 'big <1>.bin', state: 'uploading', failures: 1, lastError: 'ECONNRESET', queuedMs: now, size: 4 * 1048576, sentBytes: 1048576 }],
      stranded: [], feeds: [{ library: 'Library', cursor: 3, healthy: true, lastPollMs: now - 1500, changesApplied: 0, rebuilds: 0 }, { library: 'Gone', cursor: 1, healthy: false, lastError: 'refused', changesApplied: 0, rebuilds: 0 }],
      localFiles: 1,
      libraries: [{ library: 'Library', online: true, pendingUploads: 1 }, { library: 'Gone', online: true, pendingUploads: 0 }],
      metadata: { entries: 3, listings: 1, bytes: 2048, hits: 3, misses: 1, invalidations: 0 },
      blocks: { blocks: 0, bytes: 0, hits: 0, misses: 0 },
    } as unknown as StatusPageModel['status'],
    libraries: ['Library', 'Gone'],
    problems: [],
    nowMs: now,
    ...over,
  };
}

describe('status page', () => {
  it('libraries with state and feed lag; uploads with progress; caches', () => {
    const html = statusPage(model());
    expect(html).toMatch(/<td>Library<\/td><td><span class="state online">online<\/span><\/td><td class="num">1\.5 s<\/td>/);
    expect(html).toMatch(/<td>Gone<\/td><td><span class="state offline">offline<\/span><\/td><td class="num">not polled yet<\/td><td>refused<\/td>/);
    expect(html).toContain('<td>/Library/big &lt;1&gt;.bin</td>');
    expect(html).toContain('<progress max="4194304" value="1048576"></progress> <span class="num">25 % · 1.0 MiB of 4.0 MiB</span>');
    expect(html).toContain('1 pending');
    expect(html).toMatch(/<td>metadata<\/td><td>2\.0 KiB<\/td><td class="num">3<\/td><td class="num">1<\/td><td class="num">75 %<\/td>/);
    expect(html).toContain('No warnings or errors since the start.');
    expect(html).toContain('<script src="/status.js" defer></script>');
  });

  it('open conflicts: the file, the other version kept beside it, who made it', () => {
    const base = model();
    const html = statusPage(model({ status: { ...base.status, conflicts: [{ library: 'Library', fullpath: 'a <b>.txt', kind: 'changed', copy: 'a <b> (conflict Bob 2026-01-01 11-59-00).txt', otherBy: 'Bob', otherMtimeMs: now - 60_000, atMs: now - 5000 }] } }));
    expect(html).toContain('<h2>Conflicts <span class="count">1 open</span></h2>');
    expect(html).toContain('<td>/Library/a &lt;b&gt;.txt</td><td>/Library/a &lt;b&gt; (conflict Bob 2026-01-01 11-59-00).txt</td><td>Bob</td>');
    expect(statusPage(model())).not.toContain('Conflicts');
  });

  it('what is kept on this machine: pinned paths, files being fetched with progress, errors', () => {
    const base = model();
    const pins = { pins: ['/Library/docs'], files: 3, bytes: 3 * 1048576, pendingFiles: 1, pendingBytes: 1048576,
      fetching: [{ path: '/Library/docs/a <b>.pdf', done: 524288, size: 1048576 }], errors: [{ path: '/Library/docs/c.txt', error: 'service unreachable' }] };
    const html = statusPage(model({ status: { ...base.status, pins } }));
    expect(html).toContain('<h2>Kept on this machine <span class="count">3 files, 3.0 MiB · 1 files, 1.0 MiB still to fetch</span></h2>');
    expect(html).toContain('<td>/Library/docs</td><td>pinned</td>');
    expect(html).toContain('<td>/Library/docs/a &lt;b&gt;.pdf</td><td><progress max="1048576" value="524288"></progress>');
    expect(html).toContain('<td>/Library/docs/c.txt</td><td>service unreachable</td>');
    expect(statusPage(model())).not.toContain('Kept on this machine');
  });

  it('recent problems come from the log, newest first, without secrets', () => {
    const problems = new RecentProblems(2);
    const logger = createLogger({ level: 'info', destination: new Writable({ write: (_c, _e, done) => done() }), problems });
    logger.info('fine');
    logger.child({ part: 'vfs' }).warn({ library: 'Library', err: 'feed poll failed: <timeout>', secret: 'hunter2' }, 'feed failing');
    logger.error({ path: '/Library/a.txt' }, 'upload refused');
    logger.error('third');
    expect(problems.list().map((p) => p.msg)).toEqual(['third', 'upload refused']);
    const warn = new RecentProblems();
    createLogger({ level: 'info', destination: new Writable({ write: (_c, _e, done) => done() }), problems: warn }).child({ part: 'vfs' }).warn({ library: 'L', err: '<x>', secret: 'hunter2' }, 'feed failing');
    expect(warn.list()[0]).toMatchObject({ level: 'warn', msg: 'feed failing', fields: { part: 'vfs', library: 'L', err: '<x>' } });
    const html = statusPage(model({ problems: warn.list() }));
    expect(html).toContain('feed failing');
    expect(html).toContain('err=&lt;x&gt;');
    expect(html).not.toContain('hunter2');
  });
});
