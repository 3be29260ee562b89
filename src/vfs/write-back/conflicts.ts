/**
 * Conflicts keep both. A local version remembers what it may replace on the service: the content hash of
 * the service's version it started from (its base) and the hashes of the local versions it was made from
 * that may reach the service before it (`ConflictBase`). Right before its commit the service's current
 * version at the path is looked at (a new file is instead committed without replacing: the service then
 * tells at once, with no request more, whether a file took the name meanwhile; if so, that file is moved
 * to its conflict name and the new one to the name; a retry, whose earlier commit may have landed with
 * its answer lost, looks first, and finds the same bytes its own):
 *
 * - it is one of those (or the same bytes, or a version this gateway committed at the path itself, of
 *   any lineage: writers at once through both front ends; or committed at another path and moved there
 *   by a rename made here): no conflict, the commit replaces it;
 * - it is another file or other bytes (someone changed or replaced it meanwhile, online or while this
 *   gateway was offline): the service's version is first copied beside it, on the service, as
 *   `name (conflict <who> <yyyy-mm-dd hh-mm-ss>).ext` (who changed it, and when, in UTC), or moved there
 *   where the library copies under the same name only (a member's); then the local version is committed
 *   at the name. Neither side leaves the folder;
 * - it is gone (deleted elsewhere while edited here): the commit brings the file back as the edited version.
 *
 * A delete made here is based on the version it removed (`deleteKeeps`): when the service's version is no
 * longer one of those (edited or replaced elsewhere meanwhile), it is not removed: the other edit stays at
 * the name. A version this gateway committed there itself is removed all the same. The program's unlink still succeeds: the version it removed is gone.
 *
 * The local side keeps the name: programs holding the file open here go on reading and writing it, and
 * what a program here saved is what it finds at the name afterwards. The other side's copy is made by the
 * service (a server-side copy: nothing downloaded). A version of unknown base (a journal entry written
 * before bases were recorded) is committed unchecked.
 *
 * Every conflict is logged (warn) and listed in the gateway's status (`ctl status`, the status page).
 */
import type { Logger } from '../../shared/log.js';
import { systemClock } from '../clock.js';
import { baseName, isWithin, joinPath, numberedPath, parentOf, type CommitOptions, type CommitSource, type Remote, type RemoteEntry } from '../remote.js';
import { VfsError, type Operator } from '../types.js';
import { keyOf } from './path-key.js';

/**
 * Content hashes the service may hold at the path for a version to replace it without a conflict: its
 * base's, then those of the local versions it came from. `NEW_FILE` first: the lineage began here as a new
 * file, and the service has had none of it yet (nothing at the path is then no deletion). Undefined:
 * unknown (not checked).
 */
export type ConflictBase = readonly string[] | undefined;

/** Marks a lineage begun here as a new file that the service has had nothing of yet (never a content hash). */
export const NEW_FILE = 'new';

/** The most hashes a version carries (the newest are kept: older ones were replaced by them). */
const LINEAGE_MAX = 16;

/** What a version made from `from` (holding `fromSha1`, when known) may replace: `from`'s, and `from` itself. */
export function baseAfter(from: ConflictBase, fromSha1: string | undefined): ConflictBase {
  if (from === undefined) return undefined;
  if (fromSha1 === undefined || from.includes(fromSha1)) return from;
  const next = [...from, fromSha1];
  if (next.length <= LINEAGE_MAX) return next;
  return next[0] === NEW_FILE ? [NEW_FILE, ...next.slice(-(LINEAGE_MAX - 1))] : next.slice(-LINEAGE_MAX);
}

/** After the service took `sha1` of the lineage of `from`: that may be replaced, and the lineage is no longer new. */
export function baseUploaded(from: ConflictBase, sha1: string | undefined): ConflictBase {
  return from === undefined ? undefined : baseAfter(from.filter((h) => h !== NEW_FILE), sha1);
}

/**
 * What a version may replace once it takes the path over from `other`, acknowledged there meanwhile
 * without being its ancestor (two replaces at once, a replace and a write handle): its own lineage, then
 * `other`'s and `other` itself. When the service has had some of `other`'s lineage, this one is no
 * longer new either.
 */
export function baseJoined(mine: ConflictBase, other: ConflictBase, otherSha1: string | undefined): ConflictBase {
  if (mine === undefined || other === undefined) return mine;
  let out: ConflictBase = other.includes(NEW_FILE) ? mine : mine.filter((h) => h !== NEW_FILE);
  for (const h of other) if (h !== NEW_FILE) out = baseAfter(out, h);
  return baseAfter(out, otherSha1);
}

/** A version's base from the service's entry it started from (undefined: a new file). */
export function baseOf(entry: RemoteEntry | undefined): string[] {
  return entry?.contentHash ? [entry.contentHash] : [NEW_FILE];
}

/** True for the base of a new file made here with no version before it: nothing may be at the path. */
export function isNewFile(base: readonly string[]): boolean {
  return base.length === 0 || (base.length === 1 && base[0] === NEW_FILE);
}

export type ConflictKind =
  /** The service's version changed or was replaced: it was kept as `copy`, the local version took the name. */
  | 'changed'
  /** The file was deleted elsewhere while edited here: the edited version brought it back. */
  | 'deleted'
  /** The file was deleted here but changed elsewhere since the version deleted: the other version stays at the name. */
  | 'restored';

export interface Conflict {
  library: string;
  /** The path the local version was committed to. */
  fullpath: string;
  kind: ConflictKind;
  /** With `changed`: the path of the copy of the service's version. */
  copy?: string;
  /** Who made the service's version (its last modifier), when the service says. */
  otherBy?: string;
  /** When the service's version was made, ms since the epoch. */
  otherMtimeMs?: number;
  /** When the conflict was found, ms since the epoch. */
  atMs: number;
}

/** Longest `who` in a copy's name. */
const WHO_MAX = 40;

/** `who` as a part of a file name: no slash, no control or bracket characters, bounded. */
export function whoPart(who: string | undefined): string {
  // eslint-disable-next-line no-control-regex
  const clean = (who ?? '').replace(/[\u0000-\u001f\u007f/\\()]+/g, ' ').replace(/\s+/g, ' ').trim().slice(0, WHO_MAX).trim();
  return clean === '' ? 'unknown' : clean;
}

/** `yyyy-mm-dd hh-mm-ss` in UTC (no colon: names stay valid on every file system). */
export function whenPart(ms: number): string {
  const iso = new Date(ms).toISOString(); // 2026-11-29T04:31:07.123Z
  return `${iso.slice(0, 10)} ${iso.slice(11, 19).replace(/:/g, '-')}`;
}

/**
 * The name of the copy of `fullpath` made by `who` at `whenMs`: `name (conflict who date time).ext`, the
 * extension being what follows the last dot (none for a name whose only dot leads it, `.bashrc`). `n` > 1
 * tells apart copies that would share a name (`… time 2).ext`).
 */
export function conflictCopyPath(fullpath: string, who: string | undefined, whenMs: number, n = 1): string {
  const name = baseName(fullpath);
  const dot = name.lastIndexOf('.');
  const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ''];
  const tag = `conflict ${whoPart(who)} ${whenPart(whenMs)}${n > 1 ? ` ${n}` : ''}`;
  return joinPath(parentOf(fullpath), `${stem} (${tag})${ext}`);
}

/** True for a name `conflictCopyPath` makes. */
export function isConflictCopy(fullpath: string): boolean {
  return / \(conflict [^()]* \d{4}-\d{2}-\d{2} \d{2}-\d{2}-\d{2}( \d+)?\)(\.[^./]*)?$/.test(baseName(fullpath));
}

/** What to do before committing over `current` a version that may replace `base`. */
export function conflictOf(base: ConflictBase, current: RemoteEntry | null): ConflictKind | undefined {
  if (base === undefined) return undefined;
  if (!current) return base.length === 0 || base.includes(NEW_FILE) ? undefined : 'deleted';
  if (current.isDir) return undefined; // the commit itself is refused
  if (current.contentHash !== undefined && base.includes(current.contentHash)) return undefined;
  return 'changed';
}

/** True when a delete based on `base` must leave `current` be: its content is none the delete saw. */
export function deleteKeepsOf(base: ConflictBase, current: RemoteEntry): boolean {
  if (base === undefined || current.isDir || current.contentHash === undefined) return false;
  return !base.includes(current.contentHash);
}

/** A version about to be committed. */
export interface CommitCandidate {
  readonly library: string;
  readonly fullpath: string;
  readonly operator?: Operator;
  conflictBase(): ConflictBase;
}

/** Paths whose versions committed here are remembered (the least recently committed forgotten first). */
const OWN_PATHS_MAX = 4096;

/** Copies tried under other names (`… 2`, `… 3`) when the copy's name is taken. */
const COPY_TRIES = 20;
/** Conflicts listed in the status, newest kept. */
const LISTED_MAX = 200;

/**
 * Looks at the service's version before each commit, keeps the other side as a copy when they conflict,
 * and lists the conflicts found in this run.
 */
export class ConflictKeeper {
  private readonly found: Conflict[] = [];
  /**
   * The content hashes this gateway committed at each path (the newest LINEAGE_MAX): its own versions.
   * One of them at the path is never a conflict, whatever lineage the version committed next comes from
   * (writers at once through several front ends make lineages that do not know of each other's versions
   * until they are acknowledged; an upload may land after a rename or an unlink made here meanwhile).
   */
  private readonly own = new Map<string, string[]>();
  /** Paths whose last commit here got no answer (see `sending`). */
  private readonly unanswered = new Set<string>();

  constructor(private readonly opts: {
    logger: Logger;
    /** A conflict copy was made (or moved) on the service: the namespace shows it from now on. */
    copied?: (library: string, entry: RemoteEntry) => void;
    now?: () => number;
  }) {}

  /**
   * Commits `v`'s content (`source`) to `fullpath` through `remote`, keeping the other side when the
   * service's version is none `v` may replace (see the module's comment). Throws what the service answered
   * (the upload is then retried as any failed attempt). `retry`: an earlier attempt of this upload failed,
   * perhaps after the service took its commit (its answer lost).
   */
  async commit(v: CommitCandidate, remote: Remote, fullpath: string, source: CommitSource, opts: CommitOptions = {}, attempt: { retry?: boolean } = {}): Promise<RemoteEntry> {
    const base = v.conflictBase();
    if (base === undefined) return remote.commit(fullpath, source, opts);
    const call = { operator: opts.operator, signal: opts.signal };
    if (isNewFile(base)) {
      // Retried, or an earlier commit of the path got no answer (its upload stopped: the kernel changed
      // the file, a newer version came): the service may hold it already. Looked at first (one request,
      // then only), so that a second commit is not placed at a numbered name, only for that name to be
      // removed again, or its own earlier bytes kept as another's.
      const look = attempt.retry || this.unanswered.has(keyOf(v.library, fullpath));
      const there = look ? await remote.stat(fullpath, call) : null;
      if (there && !there.isDir && there.contentHash === source.sha1) return this.committed(v.library, fullpath, there);
      if (there && this.isOwn(v.library, fullpath, there)) return this.committed(v.library, fullpath, await this.sending(v.library, fullpath, source, () => remote.commit(fullpath, source, opts)));
      // Another file there, or none: the earlier commit may have landed at a numbered name (the name was
      // taken then; a crash may have come between the moves that follow). Found there, it is put in place
      // as if its answer had come.
      const landed = look && !there?.isDir ? await this.landedNumbered(v.library, remote, fullpath, source.sha1, call) : undefined;
      if (landed) return this.place(v.library, remote, fullpath, source, landed, { operator: opts.operator });
      return this.commitNew(v.library, remote, fullpath, source, opts);
    }
    const current = await remote.stat(fullpath, call);
    // The service holds these very bytes already (this version reached it under another name and was
    // moved there, or an earlier attempt's answer was lost): nothing of anyone's is replaced.
    // This gateway's own version there (another lineage's, acknowledged meanwhile) is replaced as any.
    const kind = current && !current.isDir && (current.contentHash === source.sha1 || this.isOwn(v.library, fullpath, current)) ? undefined : conflictOf(base, current);
    // Found again by a retry of the same upload (the last one of the path): listed and logged once.
    const last = this.found.filter((c) => c.library === v.library && c.fullpath === fullpath).pop();
    if (kind === 'deleted' && last?.kind !== 'deleted') {
      this.note({ library: v.library, fullpath, kind, atMs: this.now() });
      this.opts.logger.warn({ library: v.library, path: fullpath }, 'conflict: deleted on the service while edited here; the edited version brings it back');
    } else if (kind === 'changed') {
      const other = current!;
      let copy: string;
      try {
        copy = await this.keepCopy(remote, v.library, fullpath, other, call);
      } catch (err) {
        if (!(err instanceof VfsError && err.code === 'ENOTSUP')) throw err;
        // A library that copies under the same name only (a member's user file API): the service's version
        // is moved to the copy's name instead, and this version committed at the name, now free.
        copy = await this.moveAside(remote, v.library, fullpath, other, call);
      }
      this.noteChanged(v.library, fullpath, copy, other);
    }
    return this.committed(v.library, fullpath, await this.sending(v.library, fullpath, source, () => remote.commit(fullpath, source, opts)));
  }

  /**
   * Runs a commit of `source` to `fullpath`. When it gets no answer (failed, or stopped
   * with its request sent), the service may have taken it all the same: its content counts as one of
   * this gateway's own versions there, and the next commit of a new file there looks first.
   */
  private async sending(library: string, fullpath: string, source: CommitSource, commit: () => Promise<RemoteEntry>): Promise<RemoteEntry> {
    try {
      const entry = await commit();
      this.unanswered.delete(keyOf(library, fullpath));
      return entry;
    } catch (err) {
      this.remember(library, fullpath, source.sha1);
      this.unanswered.add(keyOf(library, fullpath));
      if (this.unanswered.size > OWN_PATHS_MAX) this.unanswered.delete(this.unanswered.values().next().value!);
      throw err;
    }
  }

  /** `entry` was committed here at `fullpath`: its content is one of the gateway's own versions there. */
  private committed(library: string, fullpath: string, entry: RemoteEntry): RemoteEntry {
    if (entry.contentHash !== undefined) this.remember(library, fullpath, entry.contentHash);
    return entry;
  }

  /** Content of `contentHash` was sent here to `fullpath`: one of the gateway's own versions there. */
  private remember(library: string, fullpath: string, contentHash: string): void {
    const key = keyOf(library, fullpath);
    const hashes = (this.own.get(key) ?? []).filter((h) => h !== contentHash);
    hashes.push(contentHash);
    this.own.delete(key);
    this.own.set(key, hashes.slice(-LINEAGE_MAX));
    if (this.own.size > OWN_PATHS_MAX) this.own.delete(this.own.keys().next().value!);
  }

  /**
   * A rename made here moved `from` (a file, or a folder and what is in it) to `to` on the service: the
   * versions this gateway committed there are its own at the new paths too. An upload that landed at the
   * old path after the rename was decided, moved with it, is then no conflict for the next commit there.
   */
  moved(library: string, from: string, to: string): void {
    const prefix = `${library}\0`;
    for (const [key, hashes] of [...this.own]) {
      if (!key.startsWith(prefix) || !isWithin(key.slice(prefix.length), from)) continue;
      const at = `${prefix}${to}${key.slice(prefix.length + from.length)}`;
      const merged = [...(this.own.get(at) ?? []).filter((h) => !hashes.includes(h)), ...hashes].slice(-LINEAGE_MAX);
      this.own.delete(at);
      this.own.set(at, merged);
    }
    while (this.own.size > OWN_PATHS_MAX) this.own.delete(this.own.keys().next().value!);
  }

  /** True when `current` at `fullpath` holds a version this gateway committed there. */
  private isOwn(library: string, fullpath: string, current: RemoteEntry): boolean {
    return !current.isDir && current.contentHash !== undefined && (this.own.get(`${library}\0${fullpath}`)?.includes(current.contentHash) ?? false);
  }

  /**
   * A new file: committed without replacing, so that the service itself tells, at once, whether another
   * file took the name meanwhile (no look before: a copy of many new files costs no extra request). When
   * one did, it is moved to its conflict name and this one to the name.
   */
  private async commitNew(library: string, remote: Remote, fullpath: string, source: CommitSource, opts: CommitOptions): Promise<RemoteEntry> {
    const entry = await this.sending(library, fullpath, source, () => remote.commit(fullpath, source, { ...opts, replace: false }));
    if (entry.fullpath === fullpath) return this.committed(library, fullpath, entry);
    // Landed at a numbered name: what follows puts it in place and is never cut by a cancel of the upload
    // (as the commit itself is not), or the numbered name would stay, a file nobody made.
    return this.place(library, remote, fullpath, source, entry, { operator: opts.operator });
  }

  /** A new file's version that landed at a numbered name (`entry`) put at `fullpath`, the other file there kept. */
  private async place(library: string, remote: Remote, fullpath: string, source: CommitSource, entry: RemoteEntry, call: { operator?: Operator }): Promise<RemoteEntry> {
    const placed = (): RemoteEntry => ({ ...entry, fullpath, name: baseName(fullpath) });
    const other = await remote.stat(fullpath, call);
    if (!other) {
      await remote.move(entry.fullpath, fullpath, call); // gone again meanwhile
      return this.committed(library, fullpath, placed());
    }
    if (other.isDir || other.contentHash === source.sha1) {
      // A folder took the name (refused, as a replacing commit is), or the same bytes are there already
      // (this upload's earlier attempt whose answer was lost): the numbered duplicate goes.
      await remote.remove(entry.fullpath, call);
      if (other.isDir) throw new VfsError('EISDIR', `'${fullpath}' is a folder on the service`);
      return this.committed(library, fullpath, other);
    }
    if (this.isOwn(library, fullpath, other)) {
      // This gateway's own version (an upload that landed after an unlink or a rename made here, or
      // another lineage's): replaced, as a later version of the path replaces it, with no copy.
      await remote.remove(fullpath, call);
      await remote.move(entry.fullpath, fullpath, call);
      return this.committed(library, fullpath, placed());
    }
    const copy = await this.moveAside(remote, library, fullpath, other, call);
    await remote.move(entry.fullpath, fullpath, call);
    this.noteChanged(library, fullpath, copy, other);
    return this.committed(library, fullpath, placed());
  }

  /**
   * A file of `sha1` at one of `fullpath`'s numbered names (the first ten), if the service holds one. A file
   * this gateway committed at that numbered name itself (a download saved twice: `d.pdf` and `d (1).pdf`,
   * the same bytes) is a file of its own there, never taken for this one's landing.
   */
  private async landedNumbered(library: string, remote: Remote, fullpath: string, sha1: string | undefined, call: { operator?: Operator; signal?: AbortSignal }): Promise<RemoteEntry | undefined> {
    if (sha1 === undefined) return undefined;
    const numbered = new Set(Array.from({ length: 10 }, (_, i) => numberedPath(fullpath, i + 1)));
    const entries = await remote.list(parentOf(fullpath), call);
    return entries.find((e) => !e.isDir && e.contentHash === sha1 && numbered.has(e.fullpath) && !this.isOwn(library, e.fullpath, e));
  }

  private noteChanged(library: string, fullpath: string, copy: string, other: RemoteEntry): void {
    // Found again by a retry of the same upload: listed and logged once.
    if (this.found.some((c) => c.library === library && c.fullpath === fullpath && c.copy === copy)) return;
    this.note({ library, fullpath, kind: 'changed', copy, otherBy: other.lastModifiedBy, otherMtimeMs: other.mtimeMs, atMs: this.now() });
    this.opts.logger.warn({ library, path: fullpath, copy, by: other.lastModifiedBy }, 'conflict: changed on the service while edited here; kept both (the service\'s version as the copy, this edit at the name)');
  }

  private now(): number {
    return (this.opts.now ?? systemClock.now)();
  }

  /**
   * Before a delete of `fullpath` made here, based on `base`, removes `current` on the service: true when it
   * must not (changed elsewhere since; see the module's comment), logged and listed.
   */
  deleteKeeps(library: string, fullpath: string, base: ConflictBase, current: RemoteEntry): boolean {
    // This gateway's own version (another of its writers' at once): the unlink made here removes it.
    if (!deleteKeepsOf(base, current) || this.isOwn(library, fullpath, current)) return false;
    this.note({ library, fullpath, kind: 'restored', otherBy: current.lastModifiedBy, otherMtimeMs: current.mtimeMs, atMs: this.now() });
    this.opts.logger.warn({ library, path: fullpath, by: current.lastModifiedBy }, 'conflict: deleted here but changed on the service since the version deleted; not removed, the other version stays');
    return true;
  }

  /** Copies the service's version of `fullpath` to a free conflict name; its path. */
  private async keepCopy(remote: Remote, library: string, fullpath: string, other: RemoteEntry, call: { operator?: Operator; signal?: AbortSignal }): Promise<string> {
    for (let n = 1; n <= COPY_TRIES; n++) {
      const to = conflictCopyPath(fullpath, other.lastModifiedBy, other.mtimeMs, n);
      try {
        await remote.copy(fullpath, to, call);
      } catch (err) {
        if (!(err instanceof VfsError && err.code === 'EEXIST')) throw err;
        // Kept already (an attempt whose commit then failed): not copied twice.
        const there = await remote.stat(to, call);
        if (there && !there.isDir && there.contentHash !== undefined && there.contentHash === other.contentHash) return to;
        continue;
      }
      const made = await remote.stat(to, call).catch(() => null);
      if (made) this.opts.copied?.(library, made);
      return to;
    }
    throw new VfsError('EEXIST', `'${fullpath}': no free name for a conflict copy after ${COPY_TRIES} tries`);
  }

  /** Moves the other file at `fullpath` to a free conflict name; its path. */
  private async moveAside(remote: Remote, library: string, fullpath: string, other: RemoteEntry, call: { operator?: Operator; signal?: AbortSignal }): Promise<string> {
    for (let n = 1; n <= COPY_TRIES; n++) {
      const to = conflictCopyPath(fullpath, other.lastModifiedBy, other.mtimeMs, n);
      try {
        await remote.move(fullpath, to, call);
        const moved = await remote.stat(to, call).catch(() => null);
        if (moved) this.opts.copied?.(library, moved);
        return to;
      } catch (err) {
        if (!(err instanceof VfsError && err.code === 'EEXIST')) throw err;
      }
    }
    throw new VfsError('EEXIST', `'${fullpath}': no free name for a conflict copy after ${COPY_TRIES} tries`);
  }

  private note(c: Conflict): void {
    this.found.push(c);
    if (this.found.length > LISTED_MAX) this.found.splice(0, this.found.length - LISTED_MAX);
  }

  /**
   * True when `fullpath` is the file or the copy of an open conflict that kept both (`changed`): its copy
   * is not known gone (`gone`, as in `list`). Nothing is closed here (a listing asks this of every entry).
   */
  /**
   * `fullpath` was removed or moved away through this gateway: a conflict whose copy (or, without a copy,
   * whose file) it was is closed for good, whatever the cache forgets since.
   */
  gone(library: string, fullpath: string): void {
    const open = this.found.filter((c) => !(c.library === library && (c.copy ?? c.fullpath) === fullpath));
    if (open.length !== this.found.length) this.found.splice(0, this.found.length, ...open);
  }

  involves(library: string, fullpath: string, gone: (library: string, fullpath: string) => boolean): boolean {
    return this.found.some((c) => c.kind === 'changed' && c.library === library && (c.fullpath === fullpath || c.copy === fullpath) && !gone(library, c.copy!));
  }

  /**
   * The open conflicts found in this run (the newest LISTED_MAX), oldest first. `gone`: true when a path is
   * known to be no longer there (removed or renamed); a conflict whose copy (or, without a copy, whose file)
   * is gone was dealt with, and is closed for good.
   */
  list(gone?: (library: string, fullpath: string) => boolean): Conflict[] {
    if (gone) {
      const open = this.found.filter((c) => !gone(c.library, c.copy ?? c.fullpath));
      this.found.splice(0, this.found.length, ...open);
    }
    return this.found.map((c) => ({ ...c }));
  }
}
