/**
 * KnownLibraries: each library's id and name on the service as last seen, kept in the data folder
 * (`<data>/gateway/known-libraries.json`), so that a start while the service cannot be reached still knows
 * which folder each configured library is, and serves it offline (its journal, its pending folders).
 * A library is found by its authorization's client id, kept as a SHA-256 digest: no secret, nothing to
 * log in with, is written here.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { writeFileAtomic } from '../shared/atomic-file.js';
import type { RemoteInfo } from '../vfs/remote.js';

interface KnownLibrary { key: string; id: string; name: string }

/** The key of a library authorization in the file: the client id's digest. */
export function libraryKey(orgClientId: string): string {
  return createHash('sha256').update(orgClientId).digest('hex');
}

export class KnownLibraries {
  private constructor(private readonly file: string, private readonly byKey: Map<string, KnownLibrary>) {}

  /** Reads the file; a missing file is a first start (nothing known), an unreadable one says so. */
  static async open(file: string): Promise<KnownLibraries> {
    const byKey = new Map<string, KnownLibrary>();
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new KnownLibraries(file, byKey);
      throw new Error(`${file}: unreadable (${(err as Error).message}); fix or remove it`);
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw new Error(`${file}: not JSON (${(err as Error).message}); remove it (it is written again when the service answers)`);
    }
    const list = (raw as { libraries?: unknown })?.libraries;
    if (Array.isArray(list)) {
      for (const l of list as Partial<KnownLibrary>[]) {
        if (typeof l?.key === 'string' && typeof l.id === 'string' && typeof l.name === 'string') byKey.set(l.key, { key: l.key, id: l.id, name: l.name });
      }
    }
    return new KnownLibraries(file, byKey);
  }

  /** The library of this key as last seen, if ever. */
  get(key: string): RemoteInfo | undefined {
    const l = this.byKey.get(key);
    return l ? { id: l.id, name: l.name } : undefined;
  }

  /** Remembers what the service said of these libraries; writes only when something changed. */
  async remember(seen: { key: string; info: RemoteInfo }[]): Promise<void> {
    let changed = false;
    for (const { key, info } of seen) {
      const before = this.byKey.get(key);
      if (before && before.id === info.id && before.name === info.name) continue;
      this.byKey.set(key, { key, id: info.id, name: info.name });
      changed = true;
    }
    if (!changed) return;
    await mkdir(dirname(this.file), { recursive: true, mode: 0o700 });
    await writeFileAtomic(this.file, JSON.stringify({ libraries: [...this.byKey.values()] }, null, 2) + '\n', { durability: 'rename', mode: 0o600 });
  }
}
