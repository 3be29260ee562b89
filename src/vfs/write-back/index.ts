/**
 * The write-back: the one owner of the gateway's local durable state — write sessions and the versions
 * they make, their spools, the upload journal and its records, the upload queue. Nothing outside this
 * folder changes a version's state or writes a journal record; the rest of src/vfs/ imports it only
 * through this file (eslint.config.js). write-back.ts maps its files and writes its lock order.
 */
export { WriteBack, type FollowedFile, type WriteBackHost, type WriteBackOptions, type WriteBackStatus } from './write-back.js';
export { FileHasher } from './file-hasher.js';
export { Sha1Streams } from './sha1-streams.js';
export type { PendingFile, UploadStatus } from './upload-queue.js';
export type { Conflict } from './conflicts.js';
export { UploadJournal } from './upload-journal.js';
export { peekJournal } from './journal-recovery.js';
export type { JournalEntry } from './journal-entry.js';
