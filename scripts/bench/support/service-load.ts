/**
 * A realistic load on the file API of a service: `clients` clients, each in a folder of its own (so
 * their changes never refuse one another) of one library, or each in a library of its own, doing `opsPerClient` operations drawn from a fixed mix —
 * listings, info, downloads (download_url and the bytes), create_file of content already stored
 * (instant) and of new content (chunked upload), create_folder, move, del, add_tag, lock — while a
 * gateway polls the updates feed of each library and checks that every change it sees comes once, in order. Client n
 * talks to `targets[n % targets.length]` (a load balancer over several processes). Used by
 * scripts/bench/service-load.ts (timed) and by the tests' smoke run (untimed).
 */
import { createHash, randomBytes } from 'node:crypto';
import { request } from 'undici';
import type { LibraryCredential, ServiceClient } from '../../../src/api/client.js';
import { uploadFile } from '../../../src/api/upload.js';
import { bufferSource } from '../../../src/api/upload-source.js';

export type OpKind = 'ls' | 'info' | 'download' | 'create_file' | 'upload' | 'create_folder' | 'move' | 'del' | 'add_tag' | 'lock';
export const READS: readonly OpKind[] = ['ls', 'info', 'download'];

/** Weights of the mix (of 100): two thirds reads, as a drive's clients do. */
const MIX: readonly [OpKind, number][] = [
  ['ls', 35], ['info', 20], ['download', 8], ['create_file', 8], ['upload', 3], ['create_folder', 7], ['move', 7], ['del', 6], ['add_tag', 3], ['lock', 3],
];

/** Which operations a run draws: the whole mix, or only its reads or only its changes (weights kept). */
export type LoadMix = 'mixed' | 'reads' | 'writes';
export const LOAD_MIXES: readonly LoadMix[] = ['mixed', 'reads', 'writes'];

function mixOf(mix: LoadMix): [OpKind, number][] {
  const kept = MIX.filter(([k]) => mix === 'mixed' || READS.includes(k) === (mix === 'reads'));
  const sum = kept.reduce((n, [, w]) => n + w, 0);
  return kept.map(([k, w]) => [k, (w * 100) / sum]);
}

export interface LoadResult {
  /** Latencies (ms) of each kind of operation, in completion order. */
  latencies: Map<OpKind, number[]>;
  elapsedMs: number;
  /** Changes the feed poller saw; its mirror of the run's folder matched a listing at the end. */
  feedChanges: number;
}

export interface LoadOptions {
  clients: number;
  opsPerClient: number;
  /** Folder of this run (each run its own). */
  root: string;
  /** Deterministic draws. */
  seed?: number;
  /** Default `mixed`. */
  mix?: LoadMix;
  /**
   * The library of each client: client n works in `libraries[n % libraries.length]`
   * (createLoadLibraries). Default: every client in the library of the clients given.
   */
  libraries?: readonly LibraryCredential[];
}

/**
 * Creates `n` libraries through the enterprise API (`enterprise`: a client with the enterprise's
 * credentials) and binds each: their library credentials, for `LoadOptions.libraries`.
 */
export async function createLoadLibraries(enterprise: ServiceClient, n: number, name: string): Promise<LibraryCredential[]> {
  const out: LibraryCredential[] = [];
  for (let i = 0; i < n; i++) {
    const { org_id } = await enterprise.org.create({ org_name: `${name}-${i}` });
    out.push(await enterprise.org.bind({ org_id: String(org_id), title: 'load' }));
  }
  return out;
}

/** Client `c`'s view of `target`: in its own library when the load has several. */
function clientOf(target: ServiceClient, opts: LoadOptions, c: number): ServiceClient {
  const libraries = opts.libraries ?? [];
  return libraries.length === 0 ? target : target.withCredentials({ library: libraries[c % libraries.length]! });
}

const SEED_CONTENT = Buffer.from('content every instant create_file reuses\n');

/** Creates the folder of a run and the content its instant uploads reuse; call before `runLoad`. */
export async function prepareLoad(client: ServiceClient, opts: LoadOptions): Promise<void> {
  for (let l = 0; l < Math.max(1, opts.libraries?.length ?? 0); l++) {
    await uploadFile(clientOf(client, opts, l), bufferSource(SEED_CONTENT), { fullpath: `${opts.root}/seed.bin`, overwrite: true, finishWaitMs: 50 });
  }
  for (let c = 0; c < opts.clients; c++) {
    const own = clientOf(client, opts, c);
    await own.file.createFolder({ fullpath: `${opts.root}/c${c}/keep` });
    for (let i = 0; i < 20; i++) await own.file.createFile({ fullpath: `${opts.root}/c${c}/keep/f${i}.bin`, filehash: sha1(SEED_CONTENT), filesize: SEED_CONTENT.length });
  }
}

export async function runLoad(targets: readonly ServiceClient[], opts: LoadOptions): Promise<LoadResult> {
  const mix = mixOf(opts.mix ?? 'mixed');
  const latencies = new Map<OpKind, number[]>(mix.map(([k]) => [k, []]));
  let rand = opts.seed ?? 1;
  const random = () => { rand = (rand * 1103515245 + 12345) % 2147483648; return rand / 2147483648; };
  // The pollers on the last process, the lone `ls` probe (service-load.ts) on the first: the load spread.
  // A gateway follows each library it serves.
  const last = targets[targets.length - 1]!;
  const feeds = (opts.libraries?.length ? opts.libraries : [undefined]).map((library) => new FeedWatcher(library ? last.withCredentials({ library }) : last));
  let done = false;
  const polling = Promise.all(feeds.map((feed) => feed.pollUntil(() => done)));
  // A failure of the poller is reported when the load has ended (awaited below), never as an
  // unhandled rejection that would end the process before its cleanup.
  polling.catch(() => undefined);
  const t0 = performance.now();
  try {
    await Promise.all(Array.from({ length: opts.clients }, async (_, c) => {
      const client = clientOf(targets[c % targets.length]!, opts, c);
      const home = `${opts.root}/c${c}`;
      const files: string[] = [];
      const folders: string[] = [];
      let n = 0;
      for (let i = 0; i < opts.opsPerClient; i++) {
        const kind = draw(mix, random());
        const started = performance.now();
        const name = `${home}/n${i}`;
        switch (kind) {
          case 'ls': await client.file.ls({ fullpath: `${home}/keep`, size: 100 }); break;
          case 'info': await client.file.info({ fullpath: `${home}/keep/f${i % 20}.bin` }); break;
          case 'download': {
            const { urls } = await client.file.downloadUrl({ fullpath: `${home}/keep/f${i % 20}.bin` });
            const res = await request(urls[0]!);
            const body = Buffer.from(await res.body.arrayBuffer());
            if (res.statusCode !== 200 || !body.equals(SEED_CONTENT)) throw new Error(`download: status ${res.statusCode}, ${body.length} bytes`);
            break;
          }
          case 'create_file': await client.file.createFile({ fullpath: `${name}.bin`, filehash: sha1(SEED_CONTENT), filesize: SEED_CONTENT.length }); files.push(`${name}.bin`); break;
          case 'upload': {
            await uploadFile(client, bufferSource(randomBytes(64 * 1024)), { fullpath: `${name}.up`, overwrite: true, finishWaitMs: 50 });
            files.push(`${name}.up`);
            break;
          }
          case 'create_folder': await client.file.createFolder({ fullpath: `${name}/sub` }); folders.push(name); break;
          case 'move': {
            const from = files.pop() ?? folders.pop();
            if (from === undefined) { await client.file.createFolder({ fullpath: name }); folders.push(name); break; }
            const to = `${home}/m${n++}${from.slice(from.lastIndexOf('.'))}`;
            await client.file.move({ fullpath: from, dest_fullpath: to });
            (from.includes('.') ? files : folders).push(to);
            break;
          }
          case 'del': {
            const gone = files.shift() ?? folders.shift();
            if (gone === undefined) await client.file.createFolder({ fullpath: name });
            else await client.file.del({ fullpath: gone });
            break;
          }
          case 'add_tag': await client.file.addTag({ fullpath: `${home}/keep/f${i % 20}.bin`, tag: `t${i % 5}` }); break;
          case 'lock': await client.file.lock({ fullpath: `${home}/keep/f${i % 20}.bin`, lock: i % 2 === 0 ? 'lock' : 'unlock' }); break;
        }
        latencies.get(kind)!.push(performance.now() - started);
      }
    }));
  } finally {
    done = true;
  }
  const elapsedMs = performance.now() - t0;
  await polling;
  for (const feed of feeds) await feed.verify(opts.root);
  return { latencies, elapsedMs, feedChanges: feeds.reduce((n, feed) => n + feed.changes, 0) };
}

/**
 * The gateway's poller: pages the updates feed (mode compare) from its cursor until done, then once
 * more, keeping a mirror of the library (hash → path) built from the feed alone. A cursor that does not
 * advance, or an entry twice in one page, fails the run; `verify` compares the mirror with a listing.
 */
class FeedWatcher {
  changes = 0;
  private cursor = 0;
  private readonly mirror = new Map<string, string>();

  constructor(private readonly client: ServiceClient) {}

  async pollUntil(finished: () => boolean): Promise<void> {
    for (;;) {
      const last = finished();
      await this.drain();
      if (last) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  private async drain(): Promise<void> {
    for (;;) {
      const page = await this.client.file.updates({ mode: 'compare', fetch_dateline: this.cursor });
      if (page.list.length === 0) return;
      const inPage = new Set<string>();
      for (const item of page.list) {
        if (inPage.has(item.hash)) throw new Error(`updates feed: ${item.fullpath} twice in one page`);
        inPage.add(item.hash);
        if (item.cmd === 0) this.mirror.delete(item.hash);
        else this.mirror.set(item.hash, `${item.fullpath}${item.dir ? '/' : ''}`);
        this.changes++;
      }
      if (page.fetch_dateline <= this.cursor) throw new Error(`updates feed: cursor went from ${this.cursor} to ${page.fetch_dateline}`);
      this.cursor = page.fetch_dateline;
    }
  }

  /** Fails unless the mirror's entries below `root` are exactly those a recursive listing finds. */
  async verify(root: string): Promise<void> {
    const listed: string[] = [];
    const walk = async (folder: string): Promise<void> => {
      for (let start = 0; ; start += 100) {
        const page = await this.client.file.ls({ fullpath: folder, start, size: 100 });
        for (const r of page.list) {
          listed.push(`${r.fullpath}${r.dir ? '/' : ''}`);
          if (r.dir) await walk(r.fullpath);
        }
        if (page.list.length < 100) return;
      }
    };
    await walk(root);
    const mirrored = [...this.mirror.values()].filter((p) => p.startsWith(`${root}/`) && p !== `${root}/`).sort();
    listed.sort();
    const missing = listed.filter((p) => !mirrored.includes(p));
    const extra = mirrored.filter((p) => !listed.includes(p));
    if (missing.length + extra.length > 0) throw new Error(`updates feed: mirror differs from the tree: missing ${missing.slice(0, 5).join(', ')}; extra ${extra.slice(0, 5).join(', ')}`);
  }
}

function draw(mix: readonly [OpKind, number][], x: number): OpKind {
  let acc = 0;
  for (const [kind, weight] of mix) {
    acc += weight / 100;
    if (x < acc) return kind;
  }
  return mix[mix.length - 1]![0];
}

const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');

/** The q-quantile (0..1) of `values` (ms). */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}
