/**
 * DailyTraffic: bytes served per enterprise and day (UTC), by kind: `download` (download links),
 * `link` (share-link downloads), `preview` (preview pages' content). Feeds `ent_daily_stats`. Counts are
 * kept in memory and written at most once a second (and on close), so a busy download does not write the
 * database per chunk; a crash loses at most the last second of counts. Counts are kept by library and
 * added to the enterprise's row when written, so every process of a service adds its own.
 */
import type { MetadataStore } from '../store/metadata-store.js';

export type TrafficKind = 'download' | 'link' | 'preview';

export interface TrafficDay { date: string; download: number; link: number; preview: number }

const FLUSH_MS = 1000;

/** `YYYY-MM-DD` of a time in ms (UTC). */
export function dayOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

interface Counts { libraryId: number; day: string; download: number; link: number; preview: number }

export class DailyTraffic {
  private readonly pending = new Map<string, Counts>();
  /** Counts taken from `pending` by a write that has not committed yet (still part of `today`). */
  private readonly writing = new Set<Counts>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly db: MetadataStore, private readonly clock: () => number) {}

  /** Adds `bytes` served for a library. Unknown libraries and non-positive counts are ignored. */
  count(libraryId: number, kind: TrafficKind, bytes: number): void {
    if (!(bytes > 0)) return;
    const day = dayOf(this.clock());
    const key = `${libraryId}:${day}`;
    let row = this.pending.get(key);
    if (!row) {
      row = { libraryId, day, download: 0, link: 0, preview: 0 };
      this.pending.set(key, row);
    }
    row[kind] += bytes;
    this.timer ??= setTimeout(async () => this.flush(), FLUSH_MS).unref();
  }

  /** Writes the counts gathered so far. */
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.size === 0) return;
    const rows = [...this.pending.values()];
    this.pending.clear();
    for (const r of rows) this.writing.add(r);
    const up = `INSERT INTO traffic_daily (ent_id, day, download, link, preview) SELECT ent_id, ?, ?, ?, ? FROM libraries WHERE id = ?
      ON CONFLICT (ent_id, day) DO UPDATE SET download = traffic_daily.download + excluded.download, link = traffic_daily.link + excluded.link,
        preview = traffic_daily.preview + excluded.preview`;
    try {
      await this.db.tx(async () => {
        for (const r of rows) await this.db.run(up, [r.day, r.download, r.link, r.preview, r.libraryId]);
      });
    } finally {
      for (const r of rows) this.writing.delete(r);
    }
  }

  /**
   * Bytes of one kind served today (UTC) for an enterprise, counts not yet written included. The counts
   * not yet written are taken before the row is read: a write committing in between is counted twice
   * for this answer (a cap refuses a little early), never not at all.
   */
  async today(entId: number, kind: TrafficKind): Promise<number> {
    const day = dayOf(this.clock());
    const unwritten = [...this.pending.values(), ...this.writing].filter((r) => r.day === day).map((r) => ({ libraryId: r.libraryId, n: r[kind] }));
    const row = await this.db.get<{ n: number }>(`SELECT ${kind} AS n FROM traffic_daily WHERE ent_id = ? AND day = ?`, [entId, day]);
    let pending = 0;
    if (unwritten.length > 0) {
      const libraries = new Set((await this.db.all<{ id: number }>('SELECT id FROM libraries WHERE ent_id = ?', [entId])).map((r) => r.id));
      for (const r of unwritten) if (libraries.has(r.libraryId)) pending += r.n;
    }
    return (row?.n ?? 0) + pending;
  }

  /** Days from `start` to `end` inclusive (`YYYY-MM-DD`), one row per day (zeros where nothing was served). */
  async days(entId: number, start: string, end: string): Promise<TrafficDay[]> {
    await this.flush();
    const rows = await this.db.all('SELECT day, download, link, preview FROM traffic_daily WHERE ent_id = ? AND day >= ? AND day <= ? ORDER BY day', [entId, start, end]) as { day: string; download: number; link: number; preview: number }[];
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
