/**
 * LinkStore: share-link records, held in memory and persisted as one JSON file (written atomically:
 * temp file, fsync, rename; writes are serialised). Links are few per library, so a file rewrite per
 * change is cheap; a visit counter change is one such write.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../../shared/atomic-file.js';

export type LinkAuth = 'preview' | 'download' | 'upload';

export interface LinkRecord {
  /** The link's public code (the last segment of its URL). */
  code: string;
  libraryId: number;
  /** Hash of the linked file or folder: the link follows it through renames and moves. */
  hash: string;
  dir: boolean;
  /** Path when the link was created (for `links` and `link_close` by path when the entry is gone). */
  fullpath: string;
  /** keep=1 (file links): the content version the link serves, fixed at creation. Empty: follows the file. */
  keepFilehash: string;
  auth: LinkAuth;
  /** Expiry, unix seconds; -1 = permanent. */
  deadline: number;
  /** Start of validity, unix seconds; 0 = immediate. */
  startline: number;
  /** `salt:hash` (scrypt, hex) of the password; empty = none. */
  password: string;
  /** Visit limit; 0 = unlimited. */
  accessLimit: number;
  visits: number;
  wmContent: string;
  closed: boolean;
  /** Unix seconds. */
  createdAt: number;
  opName: string;
}

interface StoreFile { secret: string; links: LinkRecord[] }

export class LinkStore {
  private readonly links = new Map<string, LinkRecord>();
  private readonly path: string;
  /** Signs password cookies; persisted so that a restart keeps visitors signed in. */
  secret = '';
  private writing: Promise<void> = Promise.resolve();

  constructor(readonly dir: string) {
    this.path = join(dir, 'links.json');
  }

  async open(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    try {
      const data = JSON.parse(await readFile(this.path, 'utf8')) as StoreFile;
      this.secret = data.secret;
      for (const l of data.links) this.links.set(l.code, l);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      this.secret = randomBytes(32).toString('hex');
      await this.persist();
    }
  }

  static newCode(): string {
    return randomBytes(9).toString('base64url');
  }

  get(code: string): LinkRecord | undefined {
    return this.links.get(code);
  }

  list(libraryId: number): LinkRecord[] {
    return [...this.links.values()].filter((l) => l.libraryId === libraryId);
  }

  async put(link: LinkRecord): Promise<void> {
    this.links.set(link.code, link);
    await this.persist();
  }

  /** Persists changes made to records in place. */
  async persist(): Promise<void> {
    const data: StoreFile = { secret: this.secret, links: [...this.links.values()] };
    const run = this.writing.then(() => writeFileAtomic(this.path, JSON.stringify(data), { durability: 'fsync-file' }));
    this.writing = run.catch(() => undefined);
    await run;
  }
}
