/**
 * LinkStore: share-link records in the metadata store (table `share_links`), so that every process of a
 * service serves every link. A record is one row: the link's fixed fields as JSON, and the two that change
 * (`visits`, `closed`) as columns, each changed by one statement, so concurrent visits through different
 * processes count exactly and a visit limit holds across them. The secret that signs password cookies is
 * a service key in `settings`.
 *
 * Earlier versions kept the links in `<data>/links.json`: `open()` imports that file once (into an empty
 * table) and renames it `links.json.imported`.
 */
import { randomBytes } from 'node:crypto';
import { readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { MetadataStore } from '../store/metadata-store.js';

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
  /** Visits counted when the record was read. */
  visits: number;
  wmContent: string;
  closed: boolean;
  /** Unix seconds. */
  createdAt: number;
  opName: string;
}

interface LinkRow { code: string; library_id: number; record: string; visits: number; closed: number }

/** The settings row of the cookie secret. */
const SECRET_SETTING = 'secret:link-cookies';
const CODE_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const CODE_LENGTH = 16;

export class LinkStore {
  /** Signs password cookies; the same in every process, and kept across restarts. */
  secret = '';

  constructor(private readonly db: MetadataStore, readonly dataDir: string) {}

  async open(): Promise<void> {
    await this.importLinksFile();
    const row = await this.db.get<{ value: string }>('SELECT value FROM settings WHERE name = ?', [SECRET_SETTING]);
    if (row) {
      this.secret = row.value;
      return;
    }
    await this.db.run('INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT DO NOTHING', [SECRET_SETTING, randomBytes(32).toString('hex')]);
    this.secret = (await this.db.get<{ value: string }>('SELECT value FROM settings WHERE name = ?', [SECRET_SETTING]))!.value;
  }

  /**
   * A new link code: 16 letters and digits (about 95 bits). Never a '-' or '_': a code is pasted into
   * shells and command lines, where a leading '-' reads as an option.
   */
  static newCode(): string {
    let code = '';
    while (code.length < CODE_LENGTH) {
      for (const b of randomBytes(CODE_LENGTH)) {
        // 248 = 4 × 62: bytes above it are dropped so every character is equally likely.
        if (b < 248 && code.length < CODE_LENGTH) code += CODE_ALPHABET[b % 62];
      }
    }
    return code;
  }

  async get(code: string): Promise<LinkRecord | undefined> {
    const row = await this.db.get<LinkRow>('SELECT * FROM share_links WHERE code = ?', [code]);
    return row && fromRow(row);
  }

  async list(libraryId: number): Promise<LinkRecord[]> {
    return (await this.db.all<LinkRow>('SELECT * FROM share_links WHERE library_id = ? ORDER BY id', [libraryId])).map(fromRow);
  }

  async put(link: LinkRecord): Promise<void> {
    const { visits, closed, ...fixed } = link;
    await this.db.run('INSERT INTO share_links (code, library_id, record, visits, closed) VALUES (?, ?, ?, ?, ?)', [link.code, link.libraryId, JSON.stringify(fixed), visits, closed ? 1 : 0]);
  }

  async close(codes: readonly string[]): Promise<void> {
    await this.db.tx(async (s) => {
      for (const code of codes) await s.run('UPDATE share_links SET closed = 1 WHERE code = ?', [code]);
    });
  }

  /**
   * Counts one visit unless the link's limit is reached (one statement: visits through several processes
   * never pass the limit). True when counted; `link.visits` becomes the new count.
   */
  async countVisit(link: LinkRecord): Promise<boolean> {
    const row = await this.db.get<{ visits: number }>(
      'UPDATE share_links SET visits = visits + 1 WHERE code = ? AND (? = 0 OR visits < ?) RETURNING visits',
      [link.code, link.accessLimit, link.accessLimit],
    );
    if (!row) return false;
    link.visits = row.visits;
    return true;
  }

  /** Imports `<data>/links.json` of an earlier version into an empty table, once. */
  private async importLinksFile(): Promise<void> {
    const file = join(this.dataDir, 'links.json');
    let data: { secret: string; links: LinkRecord[] };
    try {
      data = JSON.parse(await readFile(file, 'utf8')) as typeof data;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw new Error(`share links: ${file} could not be imported: ${(e as Error).message}`);
    }
    await this.db.tx(async (s) => {
      await s.run('INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT DO NOTHING', [SECRET_SETTING, data.secret]);
      for (const l of data.links) {
        const { visits, closed, ...fixed } = l;
        await s.run('INSERT INTO share_links (code, library_id, record, visits, closed) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING', [l.code, l.libraryId, JSON.stringify(fixed), visits, closed ? 1 : 0]);
      }
    });
    await rename(file, `${file}.imported`);
  }
}

function fromRow(row: LinkRow): LinkRecord {
  return { ...(JSON.parse(row.record) as Omit<LinkRecord, 'visits' | 'closed'>), visits: Number(row.visits), closed: Number(row.closed) === 1 };
}
