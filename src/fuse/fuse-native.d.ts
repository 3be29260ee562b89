/** The part of fuse-native 2.2 (libfuse 2.9 bindings) that the FUSE front end uses. */
declare module 'fuse-native' {
  interface FuseMountOptions {
    /** ms before the binding answers ETIMEDOUT itself; false = never (we keep our own deadlines). */
    timeout?: number | false;
    force?: boolean;
    mkdir?: boolean;
    debug?: boolean;
    allowOther?: boolean;
    defaultPermissions?: boolean;
    fsname?: string;
    subtype?: string;
    autoCache?: boolean;
    kernelCache?: boolean;
    entryTimeout?: number;
    attrTimeout?: number;
    maxRead?: number;
    [key: string]: unknown;
  }

  class Fuse {
    constructor(mnt: string, ops: Record<string, (...args: any[]) => void>, opts?: FuseMountOptions);
    readonly mnt: string;
    readonly opts: FuseMountOptions;
    readonly ops: Record<string, (...args: any[]) => void>;
    mount(cb: (err: Error | null) => void): void;
    unmount(cb: (err: Error | null) => void): void;
    protected _fuseOptions(): string;
    static unmount(mnt: string, cb: (err: Error | null) => void): void;
    static isConfigured(cb: (err: Error | null, configured: boolean) => void): void;
  }
  export = Fuse;
}
