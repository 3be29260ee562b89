/**
 * How `cloudlib ctl` shows results to a person: tables whose cells are plain words (never JSON), the
 * gateway's status in sections, and help text that fits 80 columns. `--json` bypasses all of it.
 */

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let k = 0;
  while (n >= 1024 && k < units.length - 1) { n /= 1024; k++; }
  return `${k === 0 ? n : n.toFixed(1)} ${units[k]}`;
}

/** A duration for a person: `850 ms`, `4.2 s`, `3 min`, `2 h`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${Math.round(ms / 3_600_000)} h`;
}

/** A time for a person, in the local time zone: `2026-11-29 14:05`. */
export function formatDate(ms: number): string {
  const d = new Date(ms);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}`;
}

/** Fields of the service's records that hold a time (unix seconds) or a number of bytes. */
const TIME_FIELD = /(^|_)dateline$|^deadline$|_time$|^expires?$/;
const BYTES_FIELD = /^(filesize|size|size_recycle|capacity|org_capacity|used|free|size_org_total|size_org_use|space_used|space_total)$/

/**
 * A field's value for a person: times as dates (a `deadline` of 0 or less: never), byte counts with
 * units (a negative capacity: unlimited), a partner's `space` (GB) likewise; the rest as is.
 */
function fieldText(key: string, v: unknown): string | undefined {
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : undefined;
  if (n === undefined) return undefined;
  if (TIME_FIELD.test(key)) {
    if (n <= 0) return key === 'deadline' || key.startsWith('expire') ? 'never' : '';
    return formatDate(n > 1e11 ? n : n * 1000);
  }
  if (BYTES_FIELD.test(key)) return n < 0 ? 'unlimited' : formatBytes(n);
  if (key === 'space') return n < 0 ? 'unlimited' : `${n} GB`;
  return undefined;
}

/** One cell: scalars as they are (times and sizes of known fields for people); arrays joined by commas; objects as `key=value` words. */
export function cellText(v: unknown, key?: string): string {
  if (v === undefined || v === null) return '';
  if (Array.isArray(v)) return v.map((x) => cellText(x)).join(',');
  if (typeof v === 'object') return Object.entries(v as Record<string, unknown>).map(([k, x]) => `${k}=${cellText(x, k)}`).join(' ');
  return (key !== undefined ? fieldText(key, v) : undefined) ?? String(v);
}

const MAX_CELL = 48;

/** A table of records: columns in first-seen order (or as given), headers in capitals. */
export function table(rows: Record<string, unknown>[], columns?: string[], headers?: Record<string, string>): string {
  if (rows.length === 0) return '(none)';
  const cols = columns ?? [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const texts = rows.map((r) => cols.map((c) => cellText(r[c], c)));
  const heads = cols.map((c) => (headers?.[c] ?? c).toUpperCase());
  const widths = cols.map((_, k) => Math.min(MAX_CELL, Math.max(heads[k]!.length, ...texts.map((t) => t[k]!.length))));
  const line = (vals: string[]) => vals.map((v, k) => (v.length > widths[k]! ? v.slice(0, widths[k]! - 1) + '…' : v.padEnd(widths[k]!))).join('  ').trimEnd();
  return [line(heads), ...texts.map(line)].join('\n');
}

/** Renders a result for a person: tables for lists of records, `key  value` lines for records (nested ones indented). */
export function renderHuman(result: unknown, indent = ''): string {
  if (result === null || result === undefined) return `${indent}ok`;
  if (typeof result !== 'object') return `${indent}${String(result)}`;
  const rows = Array.isArray(result) ? result : Array.isArray((result as { list?: unknown }).list) ? (result as { list: unknown[] }).list : undefined;
  if (rows) {
    const body = rows.some((r) => typeof r !== 'object' || r === null || Array.isArray(r))
      ? rows.map((r) => cellText(r)).join('\n')
      : table(rows.map((r) => withoutBulky(r as Record<string, unknown>, rows.length)));
    const rest = Array.isArray(result) ? [] : Object.entries(result).filter(([k]) => k !== 'list');
    const extra = rest.map(([k, v]) => `${k}: ${cellText(v, k)}`).join('  ');
    return [body, extra].filter(Boolean).join('\n').replace(/^/gm, indent);
  }
  const entries = Object.entries(result as Record<string, unknown>);
  if (entries.length === 0) return `${indent}ok`;
  const w = Math.max(...entries.map(([k]) => k.length));
  return entries.map(([k, v]) => {
    if (v !== null && typeof v === 'object' && (Array.isArray(v) ? v.some((x) => typeof x === 'object' && x !== null) : Object.keys(v).length > 0)) {
      return `${indent}${k}:\n${renderHuman(v, `${indent}  `)}`;
    }
    return `${indent}${k.padEnd(w)}  ${cellText(v, k) || (Array.isArray(v) ? '(none)' : '')}`.trimEnd();
  }).join('\n');
}

/** The `property` column of file lists is a record of its own: left out of a table of several rows. */
function withoutBulky(r: Record<string, unknown>, count: number): Record<string, unknown> {
  if (count < 2 || !('property' in r)) return r;
  const { property: _p, ...rest } = r;
  return rest;
}

/**
 * `ctl history` in 80 columns: when, what, size, by whom, and the version's id shortened to 10
 * characters (`ctl restore --version` takes such a prefix).
 */
export function renderHistory(result: unknown): string {
  const list = ((result as { list?: Record<string, unknown>[] } | null)?.list ?? []);
  if (list.length === 0) return '(no history)';
  const rows = list.map((h) => ({
    when: cellText(h.dateline, 'dateline'),
    action: String(h.act_name ?? h.act ?? ''),
    size: Number(h.dir) === 1 ? 'folder' : cellText(h.filesize, 'filesize'),
    by: String(h.member_name ?? ''),
    version: String(h.hid ?? '').slice(0, 10),
  }));
  const by = Math.min(20, Math.max(2, ...rows.map((r) => r.by.length)));
  return table(rows.map((r) => ({ ...r, by: r.by.length > by ? r.by.slice(0, by - 1) + '…' : r.by })), ['when', 'action', 'size', 'by', 'version']);
}

interface FeedRow { library: string; cursor: number; healthy: boolean; lagMs?: number | null; lastPollMs?: number; lastError?: string; changesApplied?: number }
interface UploadRow { library: string; fullpath: string; state: string; size?: number; sentBytes?: number; failures?: number; lastError?: string }
interface CacheRow { entries?: number; blocks?: number; contents?: number; bytes: number; maxBytes?: number; hits: number; misses: number; hitRate: number | null }

function feedState(f: FeedRow | undefined | null): Record<string, unknown> {
  if (!f) return { feed: 'none' };
  return {
    feed: f.healthy ? 'healthy' : 'failing',
    lag: f.lagMs === null || f.lagMs === undefined ? (f.lastPollMs ? formatDuration(Date.now() - f.lastPollMs) : 'not polled yet') : formatDuration(f.lagMs),
    cursor: f.cursor,
    changes: f.changesApplied ?? 0,
    error: f.lastError ?? '',
  };
}

/** `ctl library ls`: one row per library, its feed in words. */
export function renderLibraries(result: unknown): string {
  const list = result as { name: string; feed: FeedRow | null }[];
  return table(list.map((l) => ({ name: l.name, ...feedState(l.feed) })), ['name', 'feed', 'lag', 'cursor', 'changes', 'error']);
}

/** `ctl ls`: name, size, modified, and each file's state (folders: `folder`, no state). */
export function renderListing(result: unknown): string {
  const entries = ((result as { entries?: { name: string; type: string; size: number; mtimeMs: number; state?: string }[] } | null)?.entries ?? []);
  if (entries.length === 0) return '(empty folder)';
  return table(entries.map((e) => ({
    name: e.type === 'folder' ? `${e.name}/` : e.name,
    size: e.type === 'folder' ? 'folder' : formatBytes(e.size),
    modified: formatDate(e.mtimeMs),
    state: e.state ?? '',
  })), ['name', 'size', 'modified', 'state']);
}

/** `ctl status`: the gateway, its libraries, uploads, and caches, each in its own section. */
export function renderStatus(result: unknown): string {
  const s = result as Record<string, unknown> & {
    libraries: { name: string; online?: boolean; offlineSinceMs?: number; pendingUploads?: number }[]; feeds: FeedRow[]; uploads: { pending: number; list: UploadRow[] };
    stranded: { library: string; fullpath: string }[]; localFiles: number; caches: Record<string, CacheRow>;
    conflicts?: { library: string; fullpath: string; kind: string; copy?: string; otherBy?: string; atMs: number }[];
  };
  const out: string[] = [];
  const facts: [string, unknown][] = [
    ['Service', `${String(s.service_url)}${s.embedded_service ? ' (embedded)' : ''}`],
    ['WebDAV', s.webdav_url ?? 'off'], ['Mount', s.mount ?? 'none'], ['Control', s.control_socket], ['Admin', s.admin_url ?? 'off'],
    ['Up for', typeof s.uptime_s === 'number' ? formatDuration(s.uptime_s * 1000) : ''],
  ];
  for (const [k, v] of facts) out.push(`${k.padEnd(9)} ${String(v)}`);
  const feeds = new Map(s.feeds.map((f) => [f.library, f]));
  const service = (l: { online?: boolean; offlineSinceMs?: number }): string =>
    l.online === false ? `offline ${l.offlineSinceMs ? formatDuration(Date.now() - l.offlineSinceMs) : ''}`.trim() : 'online';
  out.push('', 'Libraries', table(s.libraries.map((l) => ({ name: l.name, service: service(l), waiting: l.pendingUploads ?? 0, ...feedState(feeds.get(l.name)) })), ['name', 'service', 'waiting', 'feed', 'lag', 'cursor', 'changes', 'error']));
  out.push('', `Uploads: ${s.uploads.pending === 0 ? 'none pending' : `${s.uploads.pending} pending`}`);
  if (s.uploads.list.length) {
    out.push(table(s.uploads.list.map((u) => ({
      path: `/${u.library}/${u.fullpath}`, state: u.state,
      progress: u.size === undefined ? '' : `${formatBytes(u.sentBytes ?? 0)} / ${formatBytes(u.size)}`,
      tries: u.failures ?? 0, error: u.lastError ?? '',
    })), ['path', 'state', 'progress', 'tries', 'error']));
  }
  if (s.stranded.length) {
    out.push('', `Stranded: ${s.stranded.length} journaled file(s) of libraries not served (kept; served again with \`ctl library add\`)`);
    out.push(table(s.stranded.map((e) => ({ path: `/${e.library}/${e.fullpath}` }))));
  }
  if (s.conflicts?.length) {
    out.push('', `Conflicts: ${s.conflicts.length} open (both versions kept: the edit here at the name, the other beside it)`);
    out.push(table(s.conflicts.map((c) => ({
      path: `/${c.library}/${c.fullpath}`,
      other: c.copy !== undefined ? `/${c.library}/${c.copy}` : c.kind === 'deleted' ? '(deleted elsewhere; the edit brought it back)' : '(changed elsewhere; kept, not deleted)',
      by: c.otherBy ?? '', found: `${formatDuration(Date.now() - c.atMs)} ago`,
    })), ['path', 'other', 'by', 'found']));
  }
  out.push('', `Local files: ${s.localFiles} (open, written or pending)`, '', 'Caches');
  out.push(table(Object.entries(s.caches).map(([name, c]) => ({
    cache: name, items: c.entries ?? c.blocks ?? c.contents ?? 0,
    size: c.maxBytes ? `${formatBytes(c.bytes)} of ${formatBytes(c.maxBytes)}` : formatBytes(c.bytes),
    hits: c.hits, misses: c.misses, 'hit rate': c.hitRate === null ? '-' : `${Math.round(c.hitRate * 100)} %`,
  })), ['cache', 'items', 'size', 'hits', 'misses', 'hit rate']));
  const pins = s.pins as PinsRow | undefined;
  if (pins && pins.pins.length > 0) out.push('', ...renderPins(pins));
  return out.join('\n');
}

interface PinsRow {
  pins: string[]; files: number; bytes: number; pendingFiles: number; pendingBytes: number;
  fetching: { path: string; done: number; size: number }[]; errors: { path: string; error: string }[];
}

/** The pins section of `ctl status`: what is kept on this machine, what is still being fetched, errors. */
function renderPins(p: PinsRow): string[] {
  const here = p.pendingFiles === 0 ? 'all here' : `${p.pendingFiles} file(s), ${formatBytes(p.pendingBytes)} still to fetch`;
  const out = [`Kept on this machine: ${p.files} file(s), ${formatBytes(p.bytes)} (${here})`, table(p.pins.map((path) => ({ pinned: path })))];
  if (p.fetching.length) out.push(table(p.fetching.map((f) => ({ fetching: f.path, progress: `${formatBytes(f.done)} / ${formatBytes(f.size)}` }))));
  if (p.errors.length) out.push(table(p.errors.map((e) => ({ 'not fetched': e.path, error: e.error }))));
  return out;
}

/** `ctl perm show PATH`: who has what set on the folder, simple and advanced permissions side by side. */
export function renderPermissions(result: unknown): string {
  const rows = result as { who: string; simple: string[]; allowed: string[]; denied: string[] }[];
  if (rows.length === 0) return 'no permissions set on this folder (it inherits its parent\'s)';
  return table(rows.map((r) => ({ who: r.who, simple: r.simple.join(',') || '-', allowed: r.allowed.join(',') || '-', denied: r.denied.join(',') || '-' })));
}

/** Words of `text` filled into lines of at most `width` columns. */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width) { lines.push(line); line = word; } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}

/**
 * A two-column list (usage, description) in 80 columns: the description beside the usage when both fit,
 * else on the lines below, indented.
 */
export function twoColumns(items: [string, string][], width = 80): string {
  const col = Math.min(32, Math.max(...items.map(([u]) => u.length)));
  const out: string[] = [];
  for (const [usage, help] of items) {
    if (usage.length <= col) {
      const lines = wrap(help, width - col - 4);
      out.push(`  ${usage.padEnd(col)}  ${lines[0] ?? ''}`.trimEnd(), ...lines.slice(1).map((l) => `${' '.repeat(col + 4)}${l}`));
    } else {
      out.push(...wrap(usage, width - 2).map((l, i) => `  ${i ? '  ' : ''}${l}`), ...wrap(help, width - 8).map((l) => `        ${l}`));
    }
  }
  return out.join('\n');
}
