/**
 * The link file format, one codec for every side that reads or writes one. The service has no symbolic
 * links: a link `NAME` is kept as a small file `NAME.rclonelink` whose content is the link's target
 * (UTF-8, no terminating newline), as rclone's `--links` stores them. The FUSE mount shows such files as
 * links; `ctl upload` stores a local folder's links this way and `ctl download` makes links of them again.
 */

/** The suffix of a link file's name. */
export const LINK_SUFFIX = '.rclonelink';

/** Longest target, bytes (PATH_MAX less its terminating zero); a longer file is no link file. */
export const LINK_TARGET_MAX = 4095;

/** The name of the link a file named `name` holds, when such a name does (undefined otherwise). */
export function linkNameOf(name: string): string | undefined {
  return name.length > LINK_SUFFIX.length && name.endsWith(LINK_SUFFIX) ? name.slice(0, -LINK_SUFFIX.length) : undefined;
}

/** The name (or path) of the link file that holds the link named `name`. */
export function linkFileNameOf(name: string): string {
  return name + LINK_SUFFIX;
}

/** Whether an entry is a link file: a file with the suffix, small enough to hold a target. */
export function isLinkFileEntry(entry: { name: string; size: number; isDir: boolean }): boolean {
  return !entry.isDir && entry.size <= LINK_TARGET_MAX && linkNameOf(entry.name) !== undefined;
}

/** Why `target` cannot be stored as a link file ('empty' or 'too-long'), undefined when it can. */
export function linkTargetProblem(target: string): 'empty' | 'too-long' | undefined {
  const n = Buffer.byteLength(target, 'utf8');
  if (n === 0) return 'empty';
  return n > LINK_TARGET_MAX ? 'too-long' : undefined;
}

/** A link file's content for `target` (check linkTargetProblem first). */
export function encodeLinkTarget(target: string): Buffer {
  return Buffer.from(target, 'utf8');
}

/** The target a link file's content holds; undefined when the content is no target (empty or too long). */
export function decodeLinkTarget(content: Buffer): string | undefined {
  if (content.length === 0 || content.length > LINK_TARGET_MAX) return undefined;
  return content.toString('utf8');
}
