/**
 * FileStates: the state of each file as one word, the same through every front end (the mount's
 * `user.cloudlib.state` attribute, WebDAV's `state` property, `cloudlib ctl ls`). The first that holds:
 *
 * - `conflict`: the file has a conflict copy waiting to be looked at (asked of `conflictOf`, which the
 *   write-back's conflict handling answers; without it, never).
 * - `uploading`: an upload of its content is under way.
 * - `offline-only`: content of it is not on the service yet, and its library is offline (nothing goes up
 *   until the service answers again).
 * - `pending`: content of it is not on the service yet (being written, journaled, queued, retrying).
 * - `locked-by <name>`: locked on the service; `<name>` is who locked it through this gateway (the
 *   operator of the call, `gateway` when it named none), or `other` when it was locked elsewhere (the
 *   service does not say by whom).
 * - `synced`: the service has the file as shown.
 *
 * Folders have no state. Nothing here changes a file: it only reads what its owners know.
 */

export type FileState = 'synced' | 'pending' | 'uploading' | 'offline-only' | 'conflict' | `locked-by ${string}`;

/** Every state word but `locked-by …` (for documentation and checks). */
export const PLAIN_FILE_STATES: readonly FileState[] = ['synced', 'pending', 'uploading', 'offline-only', 'conflict'];

/** What the states are read from. */
export interface FileStateSources {
  /** The write-back: where the path's local content stands (WriteBack.syncState). */
  syncState(library: string, fullpath: string): 'pending' | 'uploading' | undefined;
  /** Whether the library's service answers. */
  online(library: string): boolean;
}

export class FileStates {
  /** Who locked files through this gateway, by `library\0fullpath`. */
  private readonly lockers = new Map<string, string>();
  /**
   * Whether a file has an open conflict: set by the part that makes conflict copies (the write-back), so
   * the state shows `conflict`; undefined until then.
   */
  conflictOf: ((library: string, fullpath: string) => boolean) | undefined;

  constructor(private readonly sources: FileStateSources) {}

  /** A lock taken through this gateway, by `operator` (undefined: the call named none). */
  lockTaken(library: string, fullpath: string, operator: string | undefined): void {
    this.lockers.set(`${library}\0${fullpath}`, operator?.trim() || 'gateway');
  }

  lockReleased(library: string, fullpath: string): void {
    this.lockers.delete(`${library}\0${fullpath}`);
  }

  /** The state of a file (`locked`: locked on the service, as its entry says); undefined for a folder. */
  of(library: string, file: { fullpath: string; isDir: boolean; locked?: boolean }): FileState | undefined {
    if (file.isDir) return undefined;
    if (this.conflictOf?.(library, file.fullpath)) return 'conflict';
    const sync = this.sources.syncState(library, file.fullpath);
    if (sync === 'uploading') return 'uploading';
    if (sync === 'pending') return this.sources.online(library) ? 'pending' : 'offline-only';
    const key = `${library}\0${file.fullpath}`;
    if (file.locked) return `locked-by ${this.lockers.get(key) ?? 'other'}`;
    return 'synced';
  }
}
