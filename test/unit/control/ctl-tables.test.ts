/**
 * `cloudlib ctl`'s tables: the method catalog is the endpoint table plus the gateway's methods, every verb
 * calls methods of that catalog and has help generated from it, the completion script completes verbs,
 * options, methods and parameters, and the progress line.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allEndpoints } from '../../../src/shared/endpoints.js';
import { methodCatalog } from '../../../src/control/catalog.js';
import { RPC_FAMILIES } from '../../../src/control/methods.js';
import { completionScript, formatEta, helpFor, ProgressMeter, progressLine, VERBS, verbHelp } from '../../../src/cli/ctl.js';

const catalog = methodCatalog();

describe('method catalog', () => {
  it('has every endpoint of the six families by name, with the table\'s parameters, and the gateway\'s own methods', () => {
    expect(RPC_FAMILIES).toEqual(['file', 'file2', 'user', 'org', 'ent', 'partner']);
    const endpoints = allEndpoints().filter((e) => RPC_FAMILIES.includes(e.family));
    for (const { family, name, def } of endpoints) {
      const m = catalog.find((x) => x.name === `${family}.${name}`);
      expect(m, `${family}.${name}`).toBeDefined();
      for (const [p, d] of Object.entries(def.params)) expect(m!.params).toContainEqual(expect.objectContaining({ name: p, required: d.required, type: d.type }));
    }
    expect(catalog.filter((m) => m.name.startsWith('upload.'))).toEqual([]);
    for (const own of ['status', 'flush', 'cache.drop', 'library.ls', 'library.add', 'library.remove', 'upload', 'download', 'copy', 'version.restore', 'rpc.methods']) {
      expect(catalog.map((m) => m.name)).toContain(own);
    }
  });
});

describe('verbs', () => {
  const sample: Record<string, string[]> = { upload: ['a', '/L/a'], download: ['/L/a', 'a'], cp: ['/L/a', '/L/b'], 'partner ent create': ['o', 'N'], 'partner ent order': ['o', 'renew'], 'tag add': ['/L/a', 't'], 'tag rm': ['/L/a', 't'] };
  const opts: Record<string, Record<string, string>> = { 'perm set': { member: 'm' }, restore: { version: 'v' } };
  it('each calls methods of the catalog, and its build picks one of them', () => {
    process.env.CTL_TEST_SECRET = 's';
    for (const [key, verb] of Object.entries(VERBS)) {
      for (const c of verb.calls) expect(catalog.map((m) => m.name), `${key} calls ${c}`).toContain(c);
      const built = verb.build(sample[key] ?? ['/L/x', 'y'], key === 'library add' ? { 'secret-env': 'CTL_TEST_SECRET' } : opts[key] ?? {});
      expect(verb.calls, key).toContain(built.method);
    }
  });
  it('each has --help with its usage and the parameters of the methods it calls', () => {
    for (const [key, verb] of Object.entries(VERBS)) {
      const help = verbHelp(verb, catalog);
      expect(help.replace(/\s+/g, ' '), key).toContain(`Usage: cloudlib ctl ${verb.usage}`); // wrapped to 80 columns
      for (const c of verb.calls) expect(help, key).toContain(`${c} — `);
      expect(helpFor(key.split(' '), 'USAGE', catalog)).toBe(help);
    }
    expect(helpFor([], 'USAGE', catalog)).toBe('USAGE');
    const trash = helpFor(['trash'], 'USAGE', catalog);
    expect(trash.split('\n').filter((l) => /^ {2}trash /.test(l))).toHaveLength(3);
    for (const l of trash.split('\n')) expect(l.length, l).toBeLessThanOrEqual(80);
    // PATH is explained only where the verb takes one
    expect(verbHelp(VERBS['library add']!, catalog)).not.toContain('PATH');
    expect(verbHelp(VERBS.lock!, catalog)).toContain('PATH is a gateway path');
    expect(() => helpFor(['nothing'], 'USAGE', catalog)).toThrow(/no verb or method/);
  });
});

describe('completion', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-completion-'));
  const script = join(dir, 'completion.bash');
  writeFileSync(script, completionScript('bash', catalog));
  const complete = (line: string): string[] => {
    const words = line.split(' ');
    const out = execFileSync('bash', ['-c', `source "$0"; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _cloudlib_ctl; printf '%s\\n' "\${COMPREPLY[@]}"`, script], { encoding: 'utf8' });
    return out.split('\n').filter(Boolean).sort();
  };
  it('completes verbs, their second and third words, options, methods and parameters', () => {
    try {
      expect(complete('cloudlib ctl li')).toEqual(['library', 'link']);
      expect(complete('cloudlib ctl --json link ')).toEqual(['close', 'create', 'ls']);
      expect(complete('cloudlib ctl partner ent ')).toEqual(['create', 'info', 'ls', 'order']);
      expect(complete('cloudlib ctl link create /L/a --ex')).toEqual(['--expires']);
      expect(complete('cloudlib ctl call file.lin')).toEqual(['file.link', 'file.link_close', 'file.links']);
      expect(complete('cloudlib ctl call org.bind ti')).toEqual(['title=']);
      expect(complete('cloudlib ctl --socket /tmp/x.sock dept ')).toEqual(['add', 'ls', 'members', 'rm']);
      expect(complete('cloudlib other ')).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it('zsh gets the same script through bashcompinit', () => {
    expect(completionScript('zsh', catalog)).toContain('bashcompinit');
  });
});

describe('progress line', () => {
  it('draws a bar for a known total, a count otherwise, in bytes or files', () => {
    expect(progressLine({ done: 512, total: 1024, unit: 'bytes', what: 'uploaded' })).toBe(`[${'#'.repeat(15)}${'.'.repeat(15)}]  50% 512 B/1.0 KiB uploaded`);
    expect(progressLine({ done: 1, total: 4, unit: 'files', what: 'uploaded' })).toMatch(/ 25% 1\/4 files uploaded$/);
    expect(progressLine({ done: 2048, total: 0, unit: 'bytes' })).toBe('2.0 KiB');
    // Folder copies: files done of a total known up front, speed and time left; within 80 columns.
    const line = progressLine({ done: 300 * 1024 ** 2, total: 1200 * 1024 ** 2, unit: 'bytes', what: 'uploaded', files: { done: 273, total: 1989 } }, { perSecond: 10 * 1024 ** 2, etaMs: 90_000 });
    expect(line).toBe('uploaded 300.0 MiB/1.2 GiB (25%), 273/1989 files, 10.0 MiB/s, ETA 1:30');
    expect(line.length).toBeLessThanOrEqual(80);
  });

  it('the progress meter: speed over the last seconds of a phase, time left from the total', () => {
    let now = 0;
    const m = new ProgressMeter(5000, () => now);
    expect(m.sample({ done: 0, total: 1000, what: 'read' })).toBeUndefined();
    now = 1000;
    expect(m.sample({ done: 100, total: 1000, what: 'read' })).toEqual({ perSecond: 100, etaMs: 9000 });
    now = 2000;
    expect(m.sample({ done: 0, total: 1000, what: 'uploaded' })).toBeUndefined();
    expect(formatEta(3_723_000)).toBe('1:02:03');
  });
});
