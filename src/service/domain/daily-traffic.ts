/**
 * DailyTraffic: bytes served per enterprise and day (UTC), by kind: `download` (download links),
 * `link` (share-link downloads), `preview` (preview pages' content). Feeds `ent_daily_stats`. Counts are
 * kept in memory and written at most once a second (and on close), so a busy download does not write the
 * database per chunk; a crash loses at most the last second of counts.
 */
import type { Db } from '../store/database.js';

export type TrafficKind = 'download' | 'link' | 'preview';

export interface TrafficDay { date: string; download: number; link: number; preview: number }

const FLUSH_MS = 1000;

/** `YYYY-MM-DD` of a time in ms (UTC). */
export function dayOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export class DailyTraffic {
  private readonly pending = new Map<string, { entId: number; day: string; download: number; link: number; preview: number }>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly db: Db, private readonly entOfLibrary: (libraryId: number) => number | undefined, private readonly clock: () => number) {}

  /** Adds `bytes` served for a library. Unknown libraries and non-positive counts are ignored. */
  count(libraryId: number, kind: TrafficKind, bytes: number): void {
    if (!(bytes > 0)) return;
    const entId = this.entOfLibrary(libraryId);
    if (entId === undefined) return;
    const day = dayOf(this.clock());
    const key = `${entId}:${day}`;
    let row = this.pending.get(key);
    if (!row) {
      row = { entId, day, download: 0, link: 0, preview: 0 };
      this.pending.set(key, row);
    }
    row[kind] += bytes;
    this.timer ??= setTimeout(() => this.flush(), FLUSH_MS).unref();
  }

  /** Writes the counts gathered so far. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.size === 0) return;
    const rows = [...this.pending.values()];
    this.pending.clear();
    const up = this.db.prepare(`INSERT INTO traffic_daily (ent_id, day, download, link, preview) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (ent_id, day) DO UPDATE SET download = download + excluded.download, link = link + excluded.link, preview = preview + excluded.preview`);
    this.db.transaction(() => { for (const r of rows) up.run(r.entId, r.day, r.download, r.link, r.preview); })();
  }

  /** Bytes of one kind served today (UTC) for an enterprise, counts not yet written included. */
  today(entId: number, kind: TrafficKind): number {
    const day = dayOf(this.clock());
    const row = this.db.prepare(`SELECT ${kind} AS n FROM traffic_daily WHERE ent_id = ? AND day = ?`).get(entId, day) as { n: number } | undefined;
    return (row?.n ?? 0) + (this.pending.get(`${entId}:${day}`)?.[kind] ?? 0);
  }

  /** Days from `start` to `end` inclusive (`YYYY-MM-DD`), one row per day (zeros where nothing was served). */
  days(entId: number, start: string, end: string): TrafficDay[] {
    this.flush();
    const rows = this.db.prepare('SELECT day, download, link, preview FROM traffic_daily WHERE ent_id = ? AND day >= ? AND day <= ? ORDER BY day')
      .all(entId, start, end) as { day: string; download: number; link: number; preview: number }[];
    const byDay = new Map(rows.map((r) => [r.day, r]));
    const out: TrafficDay[] = [];
    for (let t = Date.parse(`${start}T00:00:00Z`); t <= Date.parse(`${end}T00:00:00Z`); t += 86_400_000) {
      const d = dayOf(t);
      const r = byDay.get(d);
      out.push({ date: d, download: r?.download ?? 0, link: r?.link ?? 0, preview: r?.preview ?? 0 });
    }
    return out;
  }
}
