/** `cloudlib ctl watch`: one line for a person per change event, as it comes. */

/** `12:00:01 created /Lib/a.txt (3 B) by alice`; a move names where it came from. Times are UTC, when the line is made. */
export function watchLine(e: Record<string, unknown>, nowMs = Date.now()): string {
  const time = new Date(nowMs).toISOString().slice(11, 19);
  const kind = String(e.kind ?? 'changed');
  const where = e.from !== undefined ? `${String(e.from)} -> ${String(e.path)}` : String(e.path);
  const size = typeof e.size === 'number' && kind !== 'deleted' ? ` (${e.size} B)` : '';
  const folder = e.isDir === true ? ' (folder)' : '';
  const by = typeof e.by === 'string' && e.by !== '' ? ` by ${e.by}` : '';
  return `${time} ${kind.padEnd(8)} ${where}${folder}${size}${by}`;
}
