/**
 * File-system scenarios written once and run through each way into the gateway: the Vfs in-process, the
 * FUSE mount (in a child process) and the WebDAV server, each over a real embedded service. A `Drive` says
 * how a front end does each step and how the service is asked; the scenarios assert what a user and the
 * service's other clients see.
 */
import { describe, expect, it } from 'vitest';
import { Readable } from 'node:stream';
import { request } from 'undici';
import type { ServiceClient } from '../../src/api/client.js';
import { uploadFile } from '../../src/api/upload.js';

export interface Drive {
  /** The library folder's gateway path, e.g. `/Library` (paths below are relative to it). */
  readonly name: string;
  /** Writes a whole file the way this front end does (create or replace). */
  write(path: string, data: Buffer): Promise<void>;
  /** Empties an existing file, then writes `data` into it (the shell's `echo x > file`, or a PUT). */
  truncateThenWrite(path: string, data: Buffer): Promise<void>;
  read(path: string): Promise<Buffer>;
  /** Names in the library folder, as this front end lists them. */
  list(): Promise<string[]>;
  /** Modification time the front end shows, ms. */
  mtimeMs(path: string): Promise<number>;
  /** Waits until every pending upload is on the service. */
  flush(): Promise<void>;
  /** After flush: lets the front end's own attribute caches expire, so the next look asks the gateway. */
  settle(): Promise<void>;
  /** A write refused because another front end holds the file's lock: resolves with the error's name (EACCES, 423…). */
  refusedWrite(path: string, data: Buffer): Promise<string>;
  /** What this front end's refusal of a locked file is called. */
  readonly lockedError: string;
  service: {
    read(path: string): Promise<Buffer>;
    /** Sizes of the file's versions, newest first. */
    history(path: string): Promise<number[]>;
    /** Locks or unlocks the file through the gateway as the other front end would. */
    lockElsewhere(path: string, locked: boolean): Promise<void>;
    /** Another client of the service replaces the file (as member `Bob`, where the front end's harness can say who). */
    writeElsewhere(path: string, data: Buffer): Promise<void>;
    /** Names in the library folder on the service. */
    list(): Promise<string[]>;
    /** The gateway loses the service (true) or has it back (false): what is written meanwhile waits in its journal. */
    offline(on: boolean): Promise<void>;
  };
}

/** Reads and history of a file through the service's API (library-relative paths). */
export function serviceReader(client: () => ServiceClient): Pick<Drive['service'], 'read' | 'history' | 'list' | 'writeElsewhere'> {
  return {
    writeElsewhere: async (path, data) => {
      await uploadFile(client(), { size: data.length, open: (start) => Readable.from([data.subarray(start)]) }, { fullpath: path, operator: { op_name: 'Bob' } });
    },
    list: async () => {
      const names: string[] = [];
      for (let start = 0; ; start += 100) {
        const page = await client().file.ls({ fullpath: '', start, size: 100 });
        names.push(...page.list.map((e) => e.filename));
        if (page.list.length < 100) return names.sort();
      }
    },
    read: async (path) => {
      const { urls } = await client().file.downloadUrl({ fullpath: path });
      return Buffer.from(await (await request(urls[0]!)).body.arrayBuffer());
    },
    history: async (path) => (await client().file.history({ fullpath: path })).list.map((v) => Number(v.filesize)),
  };
}

export function driveScenarios(frontEnd: string, drive: () => Drive, timeoutMs = 60_000): void {
  describe(`drive scenarios through ${frontEnd}`, { timeout: timeoutMs }, () => {
    it('a file replaced several times: the service gets whole versions only, the last one current', async () => {
      const d = drive();
      const versions = [Buffer.alloc(70_000, 1), Buffer.alloc(20, 2), Buffer.alloc(300_000, 3)];
      for (const v of versions) await d.write('scenario-replace.bin', v);
      await d.flush();
      expect((await d.service.read('scenario-replace.bin')).equals(versions[2]!)).toBe(true);
      for (const size of await d.service.history('scenario-replace.bin')) expect(versions.map((v) => v.length)).toContain(size);
      expect((await d.read('scenario-replace.bin')).equals(versions[2]!)).toBe(true);
    });

    it('a file emptied and rewritten never shows empty on the service', async () => {
      const d = drive();
      await d.write('scenario-notes.txt', Buffer.from('the first text of the notes'));
      await d.flush();
      await d.truncateThenWrite('scenario-notes.txt', Buffer.from('x\n'));
      await d.flush();
      expect((await d.service.read('scenario-notes.txt')).toString()).toBe('x\n');
      expect(await d.service.history('scenario-notes.txt')).not.toContain(0);
    });

    it('an empty file is a file on the service', async () => {
      const d = drive();
      await d.write('scenario-empty', Buffer.alloc(0));
      await d.flush();
      expect((await d.service.read('scenario-empty')).length).toBe(0);
    });

    it('the modification time seen after a write stays once the upload landed', async () => {
      const d = drive();
      await d.write('scenario-time.txt', Buffer.from('saved'));
      const seen = await d.mtimeMs('scenario-time.txt');
      await d.flush();
      await d.settle();
      expect(await d.mtimeMs('scenario-time.txt')).toBe(seen);
    });

    it('a file locked through another front end refuses this one\'s writes until unlocked', async () => {
      const d = drive();
      await d.write('scenario-held.txt', Buffer.from('v1'));
      await d.flush();
      await d.service.lockElsewhere('scenario-held.txt', true);
      expect(await d.refusedWrite('scenario-held.txt', Buffer.from('v2'))).toBe(d.lockedError);
      await d.service.lockElsewhere('scenario-held.txt', false);
      await d.write('scenario-held.txt', Buffer.from('v2'));
      await d.flush();
      expect((await d.service.read('scenario-held.txt')).toString()).toBe('v2');
    });

    it('an edit here and an edit at the service on the same file: both stay in the folder, the edit here at the name', async () => {
      const d = drive();
      await d.write('scenario-both.txt', Buffer.from('first version'));
      await d.flush();
      // Edited here while the service is away (the edit waits in the journal), and at the service meanwhile.
      await d.service.offline(true);
      await d.write('scenario-both.txt', Buffer.from('edited here'));
      await d.service.writeElsewhere('scenario-both.txt', Buffer.from('edited at the service'));
      await d.service.offline(false);
      await d.flush();
      expect((await d.service.read('scenario-both.txt')).toString()).toBe('edited here');
      const copies = (await d.service.list()).filter((n) => n.startsWith('scenario-both (conflict '));
      expect(copies).toHaveLength(1);
      expect(copies[0]).toMatch(/^scenario-both \(conflict \S.* \d{4}-\d{2}-\d{2} \d{2}-\d{2}-\d{2}\)\.txt$/);
      expect((await d.service.read(copies[0]!)).toString()).toBe('edited at the service');
      // Both visible through this front end too.
      await d.settle();
      expect(await d.list()).toEqual(expect.arrayContaining(['scenario-both.txt', copies[0]!]));
      expect((await d.read('scenario-both.txt')).toString()).toBe('edited here');
      expect((await d.read(copies[0]!)).toString()).toBe('edited at the service');
    });

    it('a new file made here and one made at the service under the same name: both stay, the one made here at the name', async () => {
      const d = drive();
      // Large enough for the chunked upload protocol (the numbered name comes from its steps).
      const here = Buffer.alloc(3 * 1024 * 1024, 'made here ');
      expect(await d.list()).not.toContain('scenario-new.txt'); // the folder known before the service goes
      await d.service.offline(true);
      await d.write('scenario-new.txt', here);
      await d.service.writeElsewhere('scenario-new.txt', Buffer.from('made at the service'));
      await d.service.offline(false);
      await d.flush();
      expect((await d.service.read('scenario-new.txt')).equals(here)).toBe(true);
      const names = await d.service.list();
      const copies = names.filter((n) => n.startsWith('scenario-new (conflict '));
      expect(copies).toHaveLength(1);
      expect((await d.service.read(copies[0]!)).toString()).toBe('made at the service');
      // Nothing else left beside them (the service's numbered name was only a step).
      expect(names.filter((n) => n.startsWith('scenario-new'))).toHaveLength(2);
      await d.settle();
      expect(await d.list()).toEqual(expect.arrayContaining(['scenario-new.txt', copies[0]!]));
    });
  });
}
