/**
 * Local disk errors (spool, journal) as VfsErrors: a full disk or quota is ENOSPC, a file too large
 * for the disk's file system EFBIG, everything else (no descriptors left, an I/O error) is EIO. The message keeps the system's code for the logs.
 */
import { VfsError } from './types.js';

export function fsErrorOf(err: unknown, what: string): VfsError {
  if (err instanceof VfsError) return err;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const reason = (err as Error | undefined)?.message ?? String(err);
  if (code === 'ENOSPC' || code === 'EDQUOT') return new VfsError('ENOSPC', `${what}: the gateway's data folder is full (${code})`, { cause: err });
  // A size past what the data folder's file system can hold (a truncate to petabytes): as a local disk answers.
  if (code === 'EFBIG') return new VfsError('EFBIG', `${what}: larger than the gateway's data folder can hold (EFBIG)`, { cause: err });
  return new VfsError('EIO', `${what}: ${reason}`, { cause: err });
}
