/** FUSE front end: serves a Vfs as a mount point. */
export { mountVfs, type MountOptions, type MountedVfs } from './mount.js';
export { DEFAULT_DEADLINES, type OperationDeadlines } from './operations.js';
export { clearStaleMount, probeMountPoint, type MountPointState } from './stale-mount.js';
export { XATTR_LOCK, XATTR_TAGS } from './xattr.js';
