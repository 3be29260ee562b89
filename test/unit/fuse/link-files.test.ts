/**
 * Symbolic links as link files (src/fuse/link-files.ts): a link NAME is the file NAME.rclonelink holding
 * its target; the names and attributes a front end showing links sees, and the changes it makes.
 */
import { describe, expect, it } from 'vitest';
import { LINK_SUFFIX, LINK_TARGET_MAX, LinkFiles, TARGETS_KEPT_MAX, linkNameOf } from '../../../src/fuse/link-files.js';
import { MemoryVfs } from '../../support/memory-vfs.js';

async function read(vfs: MemoryVfs, path: string): Promise<string> {
  const h = await vfs.open(path, { read: true });
  try {
    return (await h.read(0, 1 << 16)).toString('utf8');
  } finally {
    await h.release();
  }
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  return p.then(() => 'ok', (err: { code?: string }) => err.code ?? String(err));
}

describe('link files', () => {
  it('a link is made as NAME.rclonelink holding the target, and shows as the link', async () => {
    const vfs = new MemoryVfs(['Lib']);
    const links = new LinkFiles(vfs);
    await links.make('../target dir/ñ', '/Lib/l', undefined);
    expect(await read(vfs, `/Lib/l${LINK_SUFFIX}`)).toBe('../target dir/ñ');
    const attr = await links.stat('/Lib/l');
    expect(attr).toMatchObject({ path: '/Lib/l', name: 'l', isLink: true, isDir: false, size: Buffer.byteLength('../target dir/ñ') });
    expect(await links.readTarget('/Lib/l')).toBe('../target dir/ñ');
    // Shown as its link, the link file is not found by its own name (a listing does not show it either).
    expect(await codeOf(links.stat(`/Lib/l${LINK_SUFFIX}`))).toBe('ENOENT');
    expect(await codeOf(links.readTarget(`/Lib/l${LINK_SUFFIX}`))).toBe('ENOENT');
    // One an object of the link's name hides is the file it is.
    await vfs.writeFile('/Lib/l', Buffer.from('plain'));
    expect((await links.stat(`/Lib/l${LINK_SUFFIX}`)).isLink).toBeUndefined();
  });

  it('a listing shows link files as links, unless an object of the same name is there', async () => {
    const vfs = new MemoryVfs(['Lib']);
    const links = new LinkFiles(vfs);
    await links.make('a', '/Lib/x', undefined);
    await vfs.writeFile(`/Lib/y${LINK_SUFFIX}`, Buffer.from('b'));
    await vfs.writeFile('/Lib/y', Buffer.from('plain'));
    await vfs.writeFile(`/Lib/big${LINK_SUFFIX}`, Buffer.alloc(LINK_TARGET_MAX + 1, 0x61));
    const shown = LinkFiles.shown(await vfs.readdir('/Lib')).map((e) => [e.name, !!e.isLink]).sort();
    expect(shown).toEqual([['big.rclonelink', false], ['x', true], ['y', false], ['y.rclonelink', false]]);
    expect(LinkFiles.namesFound(['x.rclonelink', 'z'])).toEqual(['x.rclonelink', 'z', 'x']);
    expect(linkNameOf(LINK_SUFFIX)).toBeUndefined();
  });

  it('making a link where something is refuses (EEXIST) and changes nothing; bad targets are refused', async () => {
    const vfs = new MemoryVfs(['Lib']);
    const links = new LinkFiles(vfs);
    await vfs.writeFile('/Lib/f', Buffer.from('file'));
    await links.make('t', '/Lib/l', undefined);
    expect(await codeOf(links.make('x', '/Lib/f'))).toBe('EEXIST');
    expect(await codeOf(links.make('x', '/Lib/l'))).toBe('EEXIST');
    expect(await codeOf(links.make('', '/Lib/e'))).toBe('ENOENT');
    expect(await codeOf(links.make('a'.repeat(LINK_TARGET_MAX + 1), '/Lib/e'))).toBe('ENAMETOOLONG');
    expect(await read(vfs, `/Lib/l${LINK_SUFFIX}`)).toBe('t');
    expect((await vfs.readdir('/Lib')).map((e) => e.name).sort()).toEqual(['f', `l${LINK_SUFFIX}`]);
    expect(await codeOf(links.readTarget('/Lib/f'))).toBe('EINVAL');
    expect(await codeOf(links.readTarget('/Lib/none'))).toBe('ENOENT');
  });

  it('unlink and rename of a link move its link file; replacing works both ways', async () => {
    const vfs = new MemoryVfs(['Lib']);
    const links = new LinkFiles(vfs);
    await links.make('t1', '/Lib/a', undefined);
    await links.rename('/Lib/a', '/Lib/b', false);
    expect(await links.readTarget('/Lib/b')).toBe('t1');
    // A link over a file: the file goes.
    await vfs.writeFile('/Lib/f', Buffer.from('file'));
    await links.rename('/Lib/b', '/Lib/f', false);
    expect(await links.readTarget('/Lib/f')).toBe('t1');
    // A file over a link: the link file goes.
    await vfs.writeFile('/Lib/g', Buffer.from('g'));
    await links.rename('/Lib/g', '/Lib/f', false);
    expect((await links.stat('/Lib/f')).isLink).toBeUndefined();
    expect((await vfs.readdir('/Lib')).map((e) => e.name)).toEqual(['f']);
    // noReplace refuses either way.
    await links.make('t2', '/Lib/l', undefined);
    expect(await codeOf(links.rename('/Lib/l', '/Lib/f', true))).toBe('EEXIST');
    expect(await codeOf(links.rename('/Lib/f', '/Lib/l', true))).toBe('EEXIST');
    // A folder does not replace a link, nor a link a folder.
    await vfs.mkdir('/Lib/dir');
    expect(await codeOf(links.rename('/Lib/dir', '/Lib/l', false))).toBe('ENOTDIR');
    expect(await codeOf(links.rename('/Lib/l', '/Lib/dir', false))).toBe('EISDIR');
    await vfs.rmdir('/Lib/dir');
    await links.unlink('/Lib/l');
    expect((await vfs.readdir('/Lib')).map((e) => e.name)).toEqual(['f']);
    expect(await codeOf(links.unlink('/Lib/l'))).toBe('ENOENT');
    // touch -h: the link file's time.
    await links.make('t3', '/Lib/n');
    await links.setTimes('/Lib/n', 1_000_000_000_000);
    expect((await links.stat('/Lib/n')).mtimeMs).toBe(1_000_000_000_000);
    expect(await links.readTarget('/Lib/n')).toBe('t3');
  });

  it('readlink of a link made or read here answers from memory while its file shows the same; a changed file is read again', async () => {
    const vfs = new MemoryVfs(['Lib']);
    const links = new LinkFiles(vfs);
    let opens = 0;
    const open = vfs.open.bind(vfs);
    vfs.open = (...args: Parameters<MemoryVfs['open']>) => {
      opens++;
      return open(...args);
    };
    await links.make('first', '/Lib/l');
    opens = 0;
    expect(await links.readTarget('/Lib/l')).toBe('first');
    expect(opens).toBe(0);
    // Replaced elsewhere (another client, WebDAV): its attributes differ, the file is read.
    await vfs.writeFile(`/Lib/l${LINK_SUFFIX}`, Buffer.from('second, longer'));
    opens = 0;
    expect(await links.readTarget('/Lib/l')).toBe('second, longer');
    expect(opens).toBe(1);
    expect(await links.readTarget('/Lib/l')).toBe('second, longer');
    expect(opens).toBe(1);
    await links.rename('/Lib/l', '/Lib/m', false);
    expect(await links.readTarget('/Lib/m')).toBe('second, longer');
    await links.unlink('/Lib/m');
    expect(links.targetsKept).toBe(0);
    expect(TARGETS_KEPT_MAX).toBeGreaterThan(0);
  });
});

describe('link files over the gateway Vfs', () => {
  it("a rename's target is looked for as a link file only when its folder's cached listing cannot say none is there", async () => {
    const { createMemoryVfs } = await import('../../../src/vfs/index.js');
    const { vfs, remotes } = await createMemoryVfs({ names: ['A'] });
    try {
      const asked: string[] = [];
      const counted = new Proxy(vfs, {
        get(target, key, receiver) {
          if (key === 'stat') return (path: string, ...rest: unknown[]) => (asked.push(path), (target.stat as (...a: unknown[]) => unknown)(path, ...rest));
          const v = Reflect.get(target, key, receiver) as unknown;
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
      const links = new LinkFiles(counted);
      await vfs.mkdir('/A/made');
      await vfs.writeFile('/A/made/.f.tmp', Buffer.from('1'));
      await links.rename('/A/made/.f.tmp', '/A/made/f', false);
      expect(asked.filter((p) => p.endsWith(LINK_SUFFIX)), 'no link file looked for').toEqual([]);
      // A link there: found in the listing, and replaced by the rename.
      await links.make('f', '/A/made/l');
      await vfs.writeFile('/A/made/.l.tmp', Buffer.from('2'));
      await links.rename('/A/made/.l.tmp', '/A/made/l', false);
      expect(await read(vfs as unknown as MemoryVfs, '/A/made/l')).toBe('2');
      expect(await codeOf(vfs.stat(`/A/made/l${LINK_SUFFIX}`))).toBe('ENOENT');
      // A folder whose listing is not cached: the link file is looked for.
      await remotes.get('A')!.mkdir('other');
      remotes.get('A')!.putFile('other/g', Buffer.from('3'));
      asked.length = 0;
      await links.rename('/A/other/g', '/A/other/h', false);
      expect(asked).toContain(`/A/other/h${LINK_SUFFIX}`);
    } finally {
      await vfs.close();
    }
  });
});
