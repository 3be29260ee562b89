/** What `cloudlib ctl` shows a person: no JSON in table cells, sections for status, 80 columns for help. */
import { describe, expect, it } from 'vitest';
import { cellText, renderHuman, renderLibraries, renderPermissions, renderStatus, table, twoColumns } from '../../../src/cli/ctl-output.js';
import { ctlCommand } from '../../../src/cli/ctl.js';
import { methodCatalog } from '../../../src/control/catalog.js';

const feed = { library: 'Library', cursor: 12, healthy: true, changesApplied: 3, rebuilds: 0, lastPollMs: Date.now() - 900, lagMs: 900 };

describe('ctl output for people', () => {
  it('cells are words, never JSON', () => {
    expect(cellText({ a: 1, b: [1, 2], c: null })).toBe('a=1 b=1,2 c=');
    const t = table([{ name: 'x', feed: { healthy: true } }]);
    expect(t).not.toMatch(/[{}"]/);
    expect(renderHuman({ org_id: 3, nested: { a: 1 } })).toBe('org_id  3\nnested:\n  a  1');
  });

  it('library ls: the feed in words', () => {
    const t = renderLibraries([{ name: 'Library', feed }, { name: 'Other', feed: { ...feed, library: 'Other', healthy: false, lastError: 'ECONNREFUSED', lagMs: 65_000 } }]);
    expect(t.split('\n')[0]).toMatch(/^NAME\s+FEED\s+LAG\s+CURSOR\s+CHANGES\s+ERROR$/);
    expect(t).toMatch(/Library\s+healthy\s+900 ms\s+12\s+3/);
    expect(t).toMatch(/Other\s+failing\s+1 min\s+12\s+3\s+ECONNREFUSED/);
    expect(t).not.toMatch(/[{}"]/);
  });

  it('status: sections, uploads with their progress, caches with sizes and hit rates', () => {
    const text = renderStatus({
      service_url: 'http://127.0.0.1:1', embedded_service: true, webdav_url: 'http://127.0.0.1:8080/', mount: null, control_socket: '/d/control.sock', admin_url: null, uptime_s: 75,
      libraries: [{ name: 'Library' }], feeds: [feed],
      uploads: { pending: 1, list: [{ id: 'u', library: 'Library', fullpath: 'big.bin', state: 'uploading', size: 2 * 1024 * 1024, sentBytes: 1024 * 1024, failures: 0, queuedMs: 0 }] },
      stranded: [{ id: 's', library: 'Gone', fullpath: 'x.txt' }], localFiles: 2,
      caches: { metadata: { entries: 5, listings: 1, bytes: 2048, hits: 3, misses: 1, invalidations: 0, hitRate: 0.75 }, blocks: { blocks: 0, bytes: 0, hits: 0, misses: 0, hitRate: null } },
    });
    expect(text).not.toMatch(/[{}"]/);
    expect(text).toContain('Service   http://127.0.0.1:1 (embedded)');
    expect(text).toContain('Up for    1 min');
    expect(text).toMatch(/\/Library\/big\.bin\s+uploading\s+1\.0 MiB \/ 2\.0 MiB/);
    expect(text).toContain('Stranded: 1');
    expect(text).toMatch(/metadata\s+5\s+2\.0 KiB\s+3\s+1\s+75 %/);
    expect(text).not.toContain('Conflicts');
  });

  it('status: open conflicts, each with the other version and who made it', () => {
    const text = renderStatus({
      service_url: 'http://127.0.0.1:1', embedded_service: true, webdav_url: null, mount: null, control_socket: '/d/control.sock', admin_url: null, uptime_s: 75,
      libraries: [{ name: 'Library' }], feeds: [feed], uploads: { pending: 0, list: [] }, stranded: [], localFiles: 0,
      conflicts: [
        { library: 'Library', fullpath: 'doc.txt', kind: 'changed', copy: 'doc (conflict Bob 2026-11-29 04-31-07).txt', otherBy: 'Bob', otherMtimeMs: 0, atMs: Date.now() - 120_000 },
        { library: 'Library', fullpath: 'gone.txt', kind: 'deleted', atMs: Date.now() },
        { library: 'Library', fullpath: 'kept.txt', kind: 'restored', otherBy: 'Eve', atMs: Date.now() },
      ],
      caches: {},
    });
    expect(text).toContain('Conflicts: 3 open');
    // Wide cells are cut to the column's width.
    expect(text).toMatch(/\/Library\/doc\.txt\s+\/Library\/doc \(conflict Bob 2026-11-29 04-31-07\)\S*\s+Bob\s+2 min ago/);
    expect(text).toMatch(/\/Library\/gone\.txt\s+\(deleted elsewhere; the edit brought it back\)/);
    expect(text).toMatch(/\/Library\/kept\.txt\s+\(changed elsewhere; kept, not deleted\)\s+Eve/);
  });

  it('status: what is kept on this machine, what is being fetched, errors', () => {
    const base = {
      service_url: 'http://127.0.0.1:1', libraries: [{ name: 'Library' }], feeds: [feed], uploads: { pending: 0, list: [] }, stranded: [], localFiles: 0,
      caches: { blocks: { blocks: 0, bytes: 0, hits: 0, misses: 0, hitRate: null } },
    };
    const text = renderStatus({ ...base, pins: { pins: ['/Library/docs'], files: 3, bytes: 3 * 1048576, pendingFiles: 1, pendingBytes: 1048576,
      fetching: [{ path: '/Library/docs/a.pdf', done: 524288, size: 1048576 }], errors: [{ path: '/Library/docs/c.txt', error: 'service unreachable' }] } });
    expect(text).not.toMatch(/[{}"]/);
    expect(text).toContain('Kept on this machine: 3 file(s), 3.0 MiB (1 file(s), 1.0 MiB still to fetch)');
    expect(text).toMatch(/PINNED\s*\n\/Library\/docs/);
    expect(text).toMatch(/\/Library\/docs\/a\.pdf\s+512\.0 KiB \/ 1\.0 MiB/);
    expect(text).toMatch(/\/Library\/docs\/c\.txt\s+service unreachable/);
    expect(renderStatus({ ...base, pins: { pins: [], files: 0, bytes: 0, pendingFiles: 0, pendingBytes: 0, fetching: [], errors: [] } })).not.toContain('Kept on this machine');
  });

  it('perm show: who, simple, allowed and denied codes', () => {
    expect(renderPermissions([{ who: 'alice@example.com', simple: [], allowed: ['pv', 'dl'], denied: ['rm'] }])).toMatch(/alice@example\.com\s+-\s+pv,dl\s+rm/);
    expect(renderPermissions([])).toContain('no permissions set');
  });

  it('help fits 80 columns: ctl --help, methods', () => {
    for (const l of ctlCommand.usage.split('\n')) expect(l.length, l).toBeLessThanOrEqual(80);
    const methods = twoColumns(methodCatalog().map((m) => [m.name, m.summary]));
    for (const l of methods.split('\n')) expect(l.length, l).toBeLessThanOrEqual(80);
    expect(methods).not.toContain('decided by');
  });
});

describe('help of every command in 80 columns', () => {
  it('cloudlib up, service, mount, webdav, ctl, and every verb and method', async () => {
    const { upCommand } = await import('../../../src/cli/up.js');
    const { serviceCommand } = await import('../../../src/cli/service.js');
    const { mountCommand } = await import('../../../src/cli/mount.js');
    const { webdavCommand } = await import('../../../src/cli/webdav.js');
    const { VERBS, verbHelp, methodHelp } = await import('../../../src/cli/ctl.js');
    const texts = [upCommand, serviceCommand, mountCommand, webdavCommand, ctlCommand].map((c) => `${c.summary}\n${c.usage}`);
    for (const v of Object.values(VERBS)) texts.push(verbHelp(v));
    for (const m of methodCatalog()) texts.push(methodHelp(m));
    for (const t of texts) for (const l of t.split('\n')) expect(l.length, l).toBeLessThanOrEqual(80);
  });
});
