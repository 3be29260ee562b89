/**
 * ChangeEvents: every change the updates feed brings, published as an event (created, changed, deleted,
 * moved, locked, unlocked; by whom) to whoever listens: the FUSE mount (the kernel forgets what it cached
 * of the name and file), `ctl watch` and the admin listener's event stream. What an event says is judged
 * from what the metadata cache knew before it applied the change (`ChangeBefore`).
 */
import { systemClock, type Clock } from './clock.js';
import { gatewayPathOf } from './gateway-path.js';
import type { RemoteChange, RemoteEntry } from './remote.js';
import type { ChangeEvent, ChangeListener, ChangeSource } from './types.js';

export { changeConcerns, type ChangeEvent, type ChangeKind, type ChangeListener, type ChangeSource } from './types.js';

/** What the metadata cache knew of a change's path before applying it. */
export interface ChangeBefore {
  /** The entry at the path: null when known not to exist, undefined when unknown. */
  previous: RemoteEntry | null | undefined;
  /** The library-relative path the same object (id) had, when it was elsewhere. */
  movedFrom?: string;
  /**
   * The gateway shows a version of its own at the path that is not all on the service yet (written,
   * journaled, being uploaded): what the feed brings there changes nothing it shows, its own upload
   * coming back before the gateway heard it landed among them.
   */
  local?: true;
  /**
   * The gateway changed the path (or a move's other end) while the feed read, or is changing it on the
   * service: what the feed brings may be its own change, or older than it; what the gateway shows comes
   * from its own change.
   */
  doubted?: true;
}

/**
 * Whether a delete the feed brings is of another object than the one the path holds as the cache knows
 * it (`previous`): one that left the path since (renamed over, replaced by a new file, through the
 * gateway or elsewhere, with the cache told). The path keeps what it holds.
 */
export function deleteOfAnother(deleted: RemoteEntry, previous: RemoteEntry | null | undefined): boolean {
  return !!previous && previous.id !== '' && deleted.id !== '' && previous.id !== deleted.id;
}

/** The event a feed change makes (without its seq). */
export function changeEventOf(library: string, change: RemoteChange, before: ChangeBefore): Omit<ChangeEvent, 'seq'> {
  const e = change.entry;
  const path = gatewayPathOf(library, e.fullpath);
  const base = { path, isDir: e.isDir, ...(e.isDir ? {} : { size: e.size }), ...(e.lastModifiedBy ? { by: e.lastModifiedBy } : {}), timeMs: e.mtimeMs };
  if (change.kind === 'delete') {
    const { size: _size, ...rest } = base;
    // Shown already: the path known empty, or holding another object than the one deleted.
    const shown = before.doubted || before.previous === null || deleteOfAnother(e, before.previous);
    return { ...rest, kind: 'deleted', isDir: before.previous ? before.previous.isDir : e.isDir, ...(shown ? { shown: true as const } : {}) };
  }
  if (before.movedFrom !== undefined && before.movedFrom !== e.fullpath) return { ...base, kind: 'moved', from: gatewayPathOf(library, before.movedFrom), ...(before.doubted ? { shown: true as const } : {}) };
  const prev = before.previous;
  const sameContent = !!prev && prev.id === e.id && prev.isDir === e.isDir && prev.size === e.size && prev.contentHash === e.contentHash;
  const shown = before.local || before.doubted || (sameContent && (prev.locked === undefined || e.locked === undefined || prev.locked === e.locked));
  return { ...kindOf(e, prev, sameContent), ...base, ...(shown ? { shown: true as const } : {}) };
}

/** The kind of an upsert at the same path. */
function kindOf(e: RemoteEntry, prev: RemoteEntry | null | undefined, sameContent: boolean): { kind: ChangeEvent['kind'] } {
  if (prev && sameContent && prev.locked !== undefined && e.locked !== undefined && prev.locked !== e.locked) return { kind: e.locked ? 'locked' : 'unlocked' };
  // Known with other content: changed. Known missing: created. Unknown, or with this content already (the
  // gateway's own change coming back): created when the service's creation time is its last change's.
  if (prev && !sameContent) return { kind: 'changed' };
  if (prev === null) return { kind: 'created' };
  return { kind: e.ctimeMs >= e.mtimeMs ? 'created' : 'changed' };
}

export class ChangeEvents implements ChangeSource {
  private readonly listeners = new Set<ChangeListener>();
  private seq = 0;

  /** `clock`: the time of the lock events (the feed's events carry the service's). */
  constructor(private readonly onListenerError: (err: unknown) => void = () => undefined, private readonly clock: Clock = systemClock) {}

  subscribe(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  get listening(): number {
    return this.listeners.size;
  }

  /** Publishes the event of one feed change to every listener (a listener that throws is reported, not the others' loss). */
  publish(library: string, change: RemoteChange, before: ChangeBefore): ChangeEvent {
    return this.emit({ seq: ++this.seq, ...changeEventOf(library, change, before) });
  }

  /** A lock taken or released through this gateway (the feed does not say locks): published at once, as shown. */
  lockChanged(path: string, locked: boolean, by?: string): ChangeEvent {
    return this.emit({ seq: ++this.seq, kind: locked ? 'locked' : 'unlocked', path, isDir: false, ...(by ? { by } : {}), timeMs: this.clock.now(), shown: true });
  }

  private emit(event: ChangeEvent): ChangeEvent {
    for (const listener of [...this.listeners]) {
      try {
        listener(event);
      } catch (err) {
        this.onListenerError(err);
      }
    }
    return event;
  }
}
