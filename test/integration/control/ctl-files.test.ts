/**
 * `cloudlib ctl` as a file tool, the way an rclone user runs it: a folder uploaded and downloaded whole
 * with include/exclude filters, --dry-run and --bwlimit, unknown options answered as such, and output for people
 * (history within 80 columns, dates and sizes for people, links of every library).
 */
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { lstat, mkdir, mkdtemp, readFile, readdir, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../../src/gateway/config.js';
import { Gateway } from '../../../src/gateway/gateway.js';
import { silentLogger } from '../../../src/shared/log.js';

const bin = fileURLToPath(new URL('../../../bin/cloudlib.js', import.meta.url));
let dir: string;
let gateway: Gateway;
let lib: string;

function ctl(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, 'ctl', '--socket', join(dir, 'data', 'control.sock'), ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr });
    });
  });
}

async function files(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      if (e.isDirectory()) await walk(join(d, e.name));
      else out.push(relative(root, join(d, e.name)));
    }
  };
  await walk(root);
  return out.sort();
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ctl-files-'));
  const config = await loadConfig({ data: join(dir, 'data'), webdav: 'off', noMount: true, serviceListen: '127.0.0.1:0', adminListen: '127.0.0.1:0' }, {}, { fuseUsable: false });
  config.admin_listen = null;
  // Written files wait the longest write-back delay: the status test sees them pending however slow the
  // machine (the copies below flush: they do not wait for it).
  config.journal.upload_delay_ms = 60_000;
  gateway = await Gateway.start({ config, logger: silentLogger });
  lib = gateway.vfs.libraryNames()[0]!;
  // A project folder as people have them.
  const src = join(dir, 'project');
  await mkdir(join(src, 'docs', 'img'), { recursive: true });
  await mkdir(join(src, 'node_modules', 'left-pad'), { recursive: true });
  await mkdir(join(src, 'build'), { recursive: true });
  await writeFile(join(src, 'README.md'), '# project\n');
  await writeFile(join(src, 'docs', 'guide.md'), 'guide '.repeat(1000));
  await writeFile(join(src, 'docs', 'img', 'logo.png'), Buffer.alloc(3000, 7));
  await writeFile(join(src, 'node_modules', 'left-pad', 'index.js'), 'module.exports = 1;\n');
  await writeFile(join(src, 'build', 'out.o'), Buffer.alloc(100));
  await writeFile(join(src, 'debug.log'), 'noise\n');
  await symlink('README.md', join(src, 'link-to-readme'));
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('ctl as a file tool', { timeout: 120_000 }, () => {
  it('a folder upload with filters: --dry-run lists and copies nothing, then the copy takes the same files', async () => {
    const args = ['upload', join(dir, 'project'), `/${lib}/project`, '--exclude', 'node_modules/**', '--exclude', '*.log', '--exclude', 'build'];
    const dry = await ctl(...args, '--dry-run');
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain(`/${lib}/project/docs/guide.md`);
    expect(dry.stdout).not.toContain('node_modules');
    expect(dry.stdout).not.toContain('debug.log');
    expect(dry.stdout).toMatch(/would upload 4 files \(1 as symbolic link\), 8\.8 KiB \(dry run: nothing was copied\)/);
    expect(dry.stdout).toContain(`/${lib}/project/link-to-readme.rclonelink  symbolic link`);
    expect(dry.stdout).not.toContain('skipped');
    expect(await gateway.vfs.stat(`/${lib}/project`).catch(() => undefined)).toBeUndefined();

    const done = await ctl(...args);
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toContain(`uploaded 4 files (1 as symbolic link), 8.8 KiB to /${lib}/project`);
    const listed = (await gateway.vfs.readdir(`/${lib}/project`)).map((a) => a.name).sort();
    expect(listed).toEqual(['README.md', 'docs', 'link-to-readme.rclonelink']);
    // The local link, stored as the mount stores one: its link file holding the target.
    const chunks: Buffer[] = [];
    for await (const c of await gateway.vfs.createReadStream(`/${lib}/project/link-to-readme.rclonelink`)) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('README.md');
    expect(gateway.vfs.status().uploads).toEqual([]);
  });

  it('a folder download with an include filter and --dry-run', async () => {
    const out = join(dir, 'back');
    const dry = await ctl('download', `/${lib}/project`, out, '--include', '*.md', '--dry-run');
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/would download 2 files/);
    await expect(readdir(out)).rejects.toThrow(/ENOENT/);
    const done = await ctl('download', `/${lib}/project`, out, '--include', '*.md');
    expect(done.code, done.stderr).toBe(0);
    expect(await files(out)).toEqual(['README.md', join('docs', 'guide.md')]);
    expect(await readFile(join(out, 'docs', 'guide.md'), 'utf8')).toBe('guide '.repeat(1000));
    const all = await ctl('--json', 'download', `/${lib}/project`, join(dir, 'all'));
    expect(JSON.parse(all.stdout)).toMatchObject({ files: 4, links: 1, size: 9019 });
    expect(await readFile(join(dir, 'all', 'docs', 'img', 'logo.png'))).toEqual(Buffer.alloc(3000, 7));
  });

  it('links round trip: a download makes a link file a symbolic link again (over a file there), a dangling one and one to a folder too', async () => {
    const src = join(dir, 'linked');
    await mkdir(join(src, 'pkg', 'bin'), { recursive: true });
    await writeFile(join(src, 'pkg', 'bin', 'tool.js'), 'run\n');
    await symlink('../pkg/bin/tool.js', join(src, 'pkg', 'tool'));
    await symlink('pkg', join(src, 'to-folder'));
    await symlink('/nowhere/at/all', join(src, 'dangling'));
    const up = await ctl('--json', 'upload', src, `/${lib}/linked`);
    expect(up.code, up.stderr).toBe(0);
    expect(JSON.parse(up.stdout)).toMatchObject({ files: 4, links: 3, skipped: [] });
    expect(await gateway.vfs.readdir(`/${lib}/linked`).then((l) => l.map((a) => a.name).sort())).toEqual(['dangling.rclonelink', 'pkg', 'to-folder.rclonelink']);

    const out = join(dir, 'linked-back');
    await mkdir(join(out, 'pkg'), { recursive: true });
    await writeFile(join(out, 'pkg', 'tool'), 'an old file where the link goes');
    const dry = await ctl('download', `/${lib}/linked`, out, '--dry-run');
    expect(dry.stdout).toContain(`${join(out, 'dangling')}  symbolic link`);
    expect(await readFile(join(out, 'pkg', 'tool'), 'utf8')).toBe('an old file where the link goes');
    const down = await ctl('download', `/${lib}/linked`, out);
    expect(down.code, down.stderr).toBe(0);
    expect(down.stdout).toContain('downloaded 4 files (3 as symbolic links)');
    expect(await readlink(join(out, 'pkg', 'tool'))).toBe('../pkg/bin/tool.js');
    expect(await readFile(join(out, 'pkg', 'tool'), 'utf8')).toBe('run\n');
    expect(await readlink(join(out, 'to-folder'))).toBe('pkg');
    expect(await readlink(join(out, 'dangling'))).toBe('/nowhere/at/all');
    expect((await lstat(join(out, 'dangling'))).isSymbolicLink()).toBe(true);
    // Nothing left beside them: each link was made aside and renamed into place.
    expect((await readdir(out)).sort()).toEqual(['dangling', 'pkg', 'to-folder']);
  });

  it('an unknown option is answered "unknown option", nothing is sent; a bad pattern is refused', async () => {
    const r = await ctl('upload', join(dir, 'project'), `/${lib}/other`, '--bogus');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown option --bogus');
    const top = await ctl('--bogus', 'status');
    expect(top.code).toBe(2);
    expect(top.stderr).toContain('unknown option --bogus');
    const bad = await ctl('upload', join(dir, 'project'), `/${lib}/other`, '--include', '[abc');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/'\[' without '\]'/);
    expect(await gateway.vfs.stat(`/${lib}/other`).catch(() => undefined)).toBeUndefined();
  });

  it('--bwlimit limits an upload and a download of their own: each completes, its bytes taken through the limit; a bad rate changes nothing', async () => {
    const up = await ctl('--json', 'upload', join(dir, 'project', 'docs'), `/${lib}/limited`, '--bwlimit', '64M');
    expect(up.code, up.stderr).toBe(0);
    const sent = JSON.parse(up.stdout) as { files: number; size: number; bwlimit: { bytes_per_s: number; bytes: number } };
    expect(sent).toMatchObject({ files: 2, size: 9000, bwlimit: { bytes_per_s: 64 * 1024 * 1024, bytes: 9000 } });
    const down = await ctl('--json', 'download', `/${lib}/limited/guide.md`, join(dir, 'limited-guide.md'), '--bwlimit', '1M:512k');
    expect(down.code, down.stderr).toBe(0);
    expect(JSON.parse(down.stdout)).toMatchObject({ size: 6000, bwlimit: { bytes_per_s: 512 * 1024, bytes: 6000 } });
    expect(await readFile(join(dir, 'limited-guide.md'), 'utf8')).toBe('guide '.repeat(1000));
    const bad = await ctl('upload', join(dir, 'project', 'README.md'), `/${lib}/bad-limit/README.md`, '--bwlimit', 'fast');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/bwlimit.*expected a rate such as 10M/);
    expect(await gateway.vfs.stat(`/${lib}/bad-limit`).catch(() => undefined)).toBeUndefined();
  });

  it('history within 80 columns, with dates and sizes for people; restore by the version shown', async () => {
    const local = join(dir, 'notes.txt');
    for (const text of ['one', 'two, longer', 'three, longer still']) {
      await writeFile(local, text);
      expect((await ctl('upload', local, `/${lib}/notes.txt`)).code).toBe(0);
    }
    const h = await ctl('history', `/${lib}/notes.txt`);
    expect(h.code, h.stderr).toBe(0);
    const lines = h.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^WHEN +ACTION +SIZE +BY +VERSION$/);
    for (const l of lines) expect(l.length, l).toBeLessThanOrEqual(80);
    expect(h.stdout).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2} /m);
    expect(h.stdout).not.toMatch(/\b\d{10}\b/); // no raw epochs
    expect(h.stdout).not.toMatch(/[0-9a-f]{40}/); // no 40-character hashes
    const oldest = lines[lines.length - 1]!;
    expect(oldest).toContain('3 B');
    const version = oldest.trim().split(/\s+/).pop()!;
    const r = await ctl('restore', `/${lib}/notes.txt`, '--version', version);
    expect(r.code, r.stderr).toBe(0);
    await gateway.vfs.refresh();
    expect((await gateway.vfs.stat(`/${lib}/notes.txt`)).size).toBe(3);
  });

  it('the versions view over the service: versions read byte-exact; the short hash of a version\'s name restores it; ls shows states', async () => {
    const local = join(dir, 'plan.txt');
    for (const text of ['first plan', 'second plan, longer']) {
      await writeFile(local, text);
      expect((await ctl('upload', local, `/${lib}/plan.txt`)).code).toBe(0);
    }
    const versions = await gateway.vfs.readdir(`/${lib}/.versions/plan.txt`);
    // Both may be of the same second (their names then sort by hash): the first is told by its size.
    expect(versions.map((v) => v.size).sort()).toEqual([10, 19]);
    const first = versions.find((v) => v.size === 10)!;
    const chunks: Buffer[] = [];
    for await (const c of await gateway.vfs.createReadStream(first.path)) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('first plan');
    const short = first.name.replace(/\.txt$/, '').split(' ').pop()!;
    expect(short).toMatch(/^[0-9a-f]{7}$/);
    const r = await ctl('restore', `/${lib}/plan.txt`, '--version', short);
    expect(r.code, r.stderr).toBe(0);
    await gateway.vfs.refresh();
    expect((await gateway.vfs.stat(`/${lib}/plan.txt`)).size).toBe(10);
    const ls = await ctl('ls', `/${lib}`);
    expect(ls.code, ls.stderr).toBe(0);
    expect(ls.stdout).toMatch(/^NAME +SIZE +MODIFIED +STATE$/m);
    expect(ls.stdout).toMatch(/^plan\.txt +10 B +\S+ \S+ +synced$/m);
    expect(ls.stdout).not.toContain('.versions');
  });

  it('link ls lists the links of every library; org ls shows sizes and an unlimited capacity for people', async () => {
    expect((await ctl('org', 'create', 'Second')).code).toBe(0);
    const add = await ctl('library', 'add', '--org', 'Second');
    expect(add.code, add.stderr).toBe(0);
    await writeFile(join(dir, 's.txt'), 'second');
    expect((await ctl('upload', join(dir, 's.txt'), '/Second/s.txt')).code).toBe(0);
    expect((await ctl('link', 'create', '/Second/s.txt')).code).toBe(0);
    expect((await ctl('link', 'create', `/${lib}/project/README.md`)).code).toBe(0);
    const ls = await ctl('link', 'ls');
    expect(ls.code, ls.stderr).toBe(0);
    expect(ls.stdout).toMatch(/^LIBRARY/);
    expect(ls.stdout).toMatch(new RegExp(`^${lib} .*README\\.md`, 'm'));
    expect(ls.stdout).toMatch(/^Second .*s\.txt/m);
    expect(ls.stdout).toMatch(/ \d{4}-\d{2}-\d{2} \d{2}:\d{2} /); // the deadline as a date
    const asJson = JSON.parse((await ctl('--json', 'link', 'ls')).stdout) as { list: { library: string }[] };
    expect(asJson.list.map((l) => l.library).sort()).toEqual([lib, 'Second'].sort());
    const one = await ctl('link', 'ls', '--library', 'Second');
    expect(one.stdout).not.toContain('README.md');
    const orgs = await ctl('org', 'ls');
    expect(orgs.code, orgs.stderr).toBe(0);
    expect(orgs.stdout).not.toMatch(/\s-1(\s|$)/);
    expect(orgs.stdout).toMatch(/\d+(\.\d)? (B|KiB|MiB)|unlimited/);
  });

  it('status counts files waiting for the write-back delay as pending at once', async () => {
    const { Readable } = await import('node:stream');
    await gateway.vfs.mkdir(`/${lib}/burst`);
    for (let i = 0; i < 5; i++) await gateway.vfs.writeFile(`/${lib}/burst/f${i}.txt`, Readable.from([Buffer.from(`file ${i}`)]));
    const s = JSON.parse((await ctl('--json', 'status')).stdout) as { uploads: { pending: number } };
    expect(s.uploads.pending).toBeGreaterThanOrEqual(5);
    const human = await ctl('status');
    expect(human.stdout).not.toContain('none pending');
    expect((await ctl('flush')).code).toBe(0);
    const after = JSON.parse((await ctl('--json', 'status')).stdout) as { uploads: { pending: number } };
    expect(after.uploads.pending).toBe(0);
  });
});
