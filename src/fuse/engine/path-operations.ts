/**
 * The path-based operations of FuseOperations.toNative() the engine's mount calls (each answers exactly
 * once through its callback), and answerOf, which awaits one.
 */
import type { NativeCallback } from '../reply.js';
import type { EngineClose } from '../../vfs/engine-lease.js';

export type Answer = [number, ...unknown[]];

/** The path-based operations of FuseOperations.toNative() this engine calls. */
export interface PathOperations {
  getattr(path: string, cb: NativeCallback): void;
  fgetattr(path: string, fh: number, cb: NativeCallback): void;
  readdir(path: string, cb: NativeCallback): void;
  access(path: string, mode: number, cb: NativeCallback): void;
  statfs(path: string, cb: NativeCallback): void;
  open(path: string, flags: number, cb: NativeCallback): void;
  truncate(path: string, size: number, cb: NativeCallback): void;
  ftruncate(path: string, fh: number, size: number, cb: NativeCallback): void;
  /** `closed`: a close the engine answered, its record written (see FileHandle.flush). */
  flush(path: string, fh: number, cb: NativeCallback, closed?: EngineClose): void;
  fsync(path: string, datasync: number, fh: number, cb: NativeCallback): void;
  /** fallocate mode 0: the file grows (with zeros) to at least `offset + length`. */
  fallocate(path: string, fh: number, offset: number, length: number, cb: NativeCallback): void;
  fsyncdir(path: string, datasync: number, fh: number, cb: NativeCallback): void;
  release(path: string, fh: number, cb: NativeCallback): void;
  unlink(path: string, cb: NativeCallback): void;
  mkdir(path: string, mode: number, cb: NativeCallback): void;
  rmdir(path: string, cb: NativeCallback): void;
  rename(from: string, to: string, cb: NativeCallback): void;
  /** Makes symbolic link `path` to `target`. */
  symlink(target: string, path: string, cb: NativeCallback): void;
  /** Answers [0, target] of symbolic link `path`. */
  readlink(path: string, cb: NativeCallback): void;
  utimens(path: string, atime: number, mtime: number, cb: NativeCallback): void;
  /** The access time alone (a setattr of atime without mtime). */
  accessTime(path: string, atime: number, cb: NativeCallback): void;
  chmod(path: string, mode: number, cb: NativeCallback): void;
  chown(path: string, uid: number, gid: number, cb: NativeCallback): void;
  setxattr(path: string, name: string, value: Buffer, position: number, flags: number, cb: NativeCallback): void;
  removexattr(path: string, name: string, cb: NativeCallback): void;
  getxattr(path: string, name: string, target: Buffer, cb: NativeCallback): void;
  listxattr(path: string, target: Buffer, cb: NativeCallback): void;
}

/** Calls a path operation and resolves with what it answered (each answers exactly once). */
export function answerOf(start: (cb: NativeCallback) => void): Promise<Answer> {
  return new Promise((resolve) => start((code, ...values) => resolve([code, ...values])));
}
