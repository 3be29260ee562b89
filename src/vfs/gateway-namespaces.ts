/**
 * GatewayNamespaces: the namespaces the gateway keeps itself inside the libraries' folders (the versions
 * view, versions-namespace.ts; Office lock files, lock-file-namespace.ts), and the one place the namespace
 * (GatewayVfs) asks about them, so that it holds no special case of its own for any. Each says which paths
 * are its own, answers the operations it takes there, and refuses the others with its own clear error, or
 * leaves them to the library (a folder named as a lock file is the library's). Asked in order: the first
 * that owns a path answers for it.
 */
import type { Readable } from 'node:stream';
import type { ClosedCreate, LeasedHandle, LeaseOpenFlags } from './engine-lease.js';
import type { Attr, CallContext, VfsError } from './types.js';

/** The operations a gateway-side namespace may answer at a path of its own (as Vfs's, see types.ts). */
export interface NamespaceOps {
  stat(path: string, ctx?: CallContext): Promise<Attr>;
  readdir(path: string, ctx?: CallContext): Promise<Attr[]>;
  open(path: string, flags: LeaseOpenFlags, ctx?: CallContext): Promise<LeasedHandle>;
  createReadStream(path: string, range: { start?: number; end?: number }, ctx?: CallContext): Promise<Readable>;
  writeFile(path: string, source: Readable | Buffer | AsyncIterable<Buffer>, ctx?: CallContext): Promise<Attr>;
  mkdir(path: string, ctx?: CallContext): Promise<Attr>;
  unlink(path: string, ctx?: CallContext): Promise<void>;
  rmdir(path: string, ctx?: CallContext): Promise<void>;
  setTimes(path: string, mtimeMs: number, ctx?: CallContext): Promise<void>;
  getTags(path: string, ctx?: CallContext): Promise<string[]>;
  setTags(path: string, tags: string[], ctx?: CallContext): Promise<void>;
  setLocked(path: string, locked: boolean, ctx?: CallContext): Promise<void>;
  /** Asked when either end is the namespace's own. */
  rename(from: string, to: string, opts: { noReplace?: boolean }, ctx?: CallContext): Promise<void>;
  /** Asked when either end is the namespace's own. */
  copy(from: string, to: string, opts: { noReplace?: boolean }, ctx?: CallContext): Promise<void>;
  /** A file the FUSE engine created, wrote and closed by itself (EngineLease.createClosed): true once taken. */
  createClosed(file: ClosedCreate, ctx?: CallContext): Promise<boolean>;
}

export type NamespaceOp = keyof NamespaceOps;

export interface GatewayNamespace {
  /** Whether `path` is this namespace's now (a lookup may decide: the versions view steps aside for a real `.versions`). */
  owns(path: string, ctx?: CallContext): boolean | Promise<boolean>;
  /** Whether `path` is this namespace's by its name alone (no lookup; every path it owns it names): the FUSE engine answers nothing there itself. */
  named(path: string): boolean;
  /** The operations it answers at paths of its own. */
  readonly ops: Partial<NamespaceOps>;
  /** The error of an operation it does not answer at a path of its own; undefined: the library answers it. */
  refusal(op: NamespaceOp, path: string): VfsError | undefined;
  /** True when nothing at its paths can be changed (Vfs.readOnlyAt). */
  readonly readOnly?: boolean;
  /** Names of the library it hides in folder listings (its own stand there instead). */
  hides?(name: string): boolean;
  /** Its own names listed in library folder `folder` (gateway path). */
  namesIn?(folder: string): string[];
  /** Its own entries listed in library folder `folder`. */
  list?(folder: string): Promise<Attr[]>;
  /** Names a lookup finds in folder `folder` that no listing shows (`listed`: what the listing gave). */
  unlisted?(folder: string, listed: readonly string[]): string[];
  /** True when its files are kept on the gateway, never the service's (journal entries of them are not uploaded). */
  keptHere?(path: string): boolean;
  /** True when it keeps the service lock of `document` for `holder` (an unlock by that holder leaves it). */
  keepsLock?(document: string, holder: string): boolean;
  /** A file or folder of the library was renamed: what it keeps of `from` goes to `to`. */
  moved?(from: string, to: string, ctx?: CallContext): Promise<void>;
  start?(): Promise<void>;
  close?(): Promise<void>;
}

export class GatewayNamespaces {
  constructor(private readonly all: readonly GatewayNamespace[]) {}

  /** The namespace that owns `path`, if any. */
  private async owner(path: string, ctx?: CallContext): Promise<GatewayNamespace | undefined> {
    for (const n of this.all) if (n.named(path) && (await n.owns(path, ctx))) return n;
    return undefined;
  }

  /**
   * Operation `op` of the namespace that owns `path`, bound; undefined when none owns it or its owner
   * leaves `op` to the library. Throws the owner's refusal. A namespace owns only paths it names, so a
   * path none names (nearly every one) is the library's at once, without a lookup or an await.
   */
  answer<K extends NamespaceOp>(op: K, path: string, ctx?: CallContext): Promise<NamespaceOps[K] | undefined> | undefined {
    if (!this.named(path)) return undefined;
    return this.owner(path, ctx).then((n) => (n ? this.opOf(n, op, path) : undefined));
  }

  /** As `answer`, for an operation with two paths (rename, copy): asked of the first namespace owning either. */
  answerEither<K extends 'rename' | 'copy'>(op: K, from: string, to: string, ctx?: CallContext): Promise<NamespaceOps[K] | undefined> | undefined {
    if (!this.named(from) && !this.named(to)) return undefined;
    return (async () => {
      for (const n of this.all) {
        const at = n.named(from) && (await n.owns(from, ctx)) ? from : n.named(to) && (await n.owns(to, ctx)) ? to : undefined;
        if (at !== undefined) return this.opOf(n, op, at);
      }
      return undefined;
    })();
  }

  private opOf<K extends NamespaceOp>(n: GatewayNamespace, op: K, path: string): NamespaceOps[K] | undefined {
    const f = n.ops[op];
    if (f) return f.bind(n.ops) as NamespaceOps[K];
    const refusal = n.refusal(op, path);
    if (refusal) throw refusal;
    return undefined;
  }

  /** True when `path` is in a namespace whose paths cannot be changed. */
  async readOnlyAt(path: string, ctx?: CallContext): Promise<boolean> {
    return !!(await this.owner(path, ctx))?.readOnly;
  }

  /** True when `path` is some namespace's by its name alone. */
  named(path: string): boolean {
    return this.all.some((n) => n.named(path));
  }

  /**
   * Files the FUSE engine created and closed by itself: those of a namespace (by name) answered by it
   * (false where it takes none, or fails), the rest by `others`, in one call; in the order given.
   */
  async createClosed(files: readonly ClosedCreate[], others: (files: readonly ClosedCreate[]) => Promise<boolean[]>, ctx?: CallContext): Promise<boolean[]> {
    const owner = files.map((f) => this.all.find((n) => n.named(f.path)));
    const rest = files.filter((_, i) => !owner[i]);
    const made = rest.length > 0 ? await others(rest) : [];
    let at = 0;
    const out: boolean[] = [];
    for (let i = 0; i < files.length; i++) {
      const n = owner[i];
      out.push(n ? (await n.ops.createClosed?.(files[i]!, ctx).catch(() => false)) ?? false : made[at++]!);
    }
    return out;
  }

  /** Names of a library folder's listing as shown: the library's less those a namespace hides, then the namespaces' own. */
  namesShown(folder: string, listed: readonly string[]): string[] {
    return [...listed.filter((name) => !this.hidden(name)), ...this.namesIn(folder)];
  }

  /** Whether a namespace hides a name of the library's listings. */
  hidden(name: string): boolean {
    return this.all.some((n) => n.hides?.(name));
  }

  /** The namespaces' own names listed in library folder `folder`. */
  namesIn(folder: string): string[] {
    return this.all.flatMap((n) => n.namesIn?.(folder) ?? []);
  }

  /** The namespaces' own entries listed in library folder `folder`. */
  async list(folder: string): Promise<Attr[]> {
    const out: Attr[] = [];
    for (const n of this.all) if (n.list) out.push(...(await n.list(folder)));
    return out;
  }

  unlisted(folder: string, listed: readonly string[]): string[] {
    return this.all.flatMap((n) => n.unlisted?.(folder, listed) ?? []);
  }

  keptHere(path: string): boolean {
    return this.all.some((n) => n.keptHere?.(path));
  }

  keepsLock(document: string, holder: string): boolean {
    return this.all.some((n) => n.keepsLock?.(document, holder));
  }

  async moved(from: string, to: string, ctx?: CallContext): Promise<void> {
    for (const n of this.all) await n.moved?.(from, to, ctx);
  }

  async start(): Promise<void> {
    for (const n of this.all) await n.start?.();
  }

  async close(): Promise<void> {
    for (const n of this.all) await n.close?.();
  }
}
