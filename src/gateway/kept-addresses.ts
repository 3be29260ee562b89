/**
 * `<data>/addresses.json`: the listen addresses the embedded service and the admin listener took at their
 * first start, kept for every later start. Share links, preview and download URLs carry the embedded
 * service's address and people bookmark the status page: both must answer at the same address after a
 * restart. A first start takes the default port (8081, 8082), or any free port when that one is taken;
 * later starts take the kept one, and a start whose kept port is taken fails with an error saying so.
 * An address given by a flag, the environment or the configuration is used as given and not kept.
 */
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { writeFileAtomic } from '../shared/atomic-file.js';
import { parseHostPort } from './config.js';

export type KeptListener = 'service' | 'admin';

/** What each listener is, for errors: its name and the flag that chooses another address. */
const LISTENERS: Record<KeptListener, { what: string; flag: string }> = {
  service: { what: 'the embedded service', flag: '--service-listen (service_listen)' },
  admin: { what: 'the admin listener (status page, /metrics, /healthz)', flag: '--admin-listen (admin_listen)' },
};

export class AddressInUseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AddressInUseError';
  }
}

/** True when `host:port` can be listened on now (another process may take it right after). */
export function portFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

/** A port free on `host` now. */
function anyFreePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen({ host, port: 0, exclusive: true }, () => {
      const addr = probe.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

function hostPort(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

export class KeptAddresses {
  private constructor(private readonly file: string, private readonly kept: Partial<Record<KeptListener, string>>) {}

  static async open(data: string): Promise<KeptAddresses> {
    const file = join(data, 'addresses.json');
    let kept: Partial<Record<KeptListener, string>> = {};
    try {
      const raw = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
      for (const k of ['service', 'admin'] as const) {
        const v = raw[k];
        if (typeof v !== 'string') continue;
        try {
          parseHostPort(v, k);
          kept[k] = v;
        } catch {
          // a hand-edited entry that is no address: chosen again as on a first start
        }
      }
    } catch {
      kept = {};
    }
    return new KeptAddresses(file, kept);
  }

  /** The kept address of a listener, if any. */
  keptFor(which: KeptListener): string | undefined {
    return this.kept[which];
  }

  /**
   * The address a default listener takes: the kept one; else `dflt` when its port is free; else any free
   * port on the same host.
   */
  async choose(which: KeptListener, dflt: string): Promise<{ listen: string; kept: boolean }> {
    const kept = this.kept[which];
    if (kept) return { listen: kept, kept: true };
    const { host, port } = parseHostPort(dflt, which);
    if (await portFree(host, port)) return { listen: dflt, kept: false };
    return { listen: hostPort(host, await anyFreePort(host)), kept: false };
  }

  /** Keeps a listener's address for the next starts (written through a power loss). */
  async keep(which: KeptListener, listen: string): Promise<void> {
    if (this.kept[which] === listen) return;
    this.kept[which] = listen;
    await writeFileAtomic(this.file, JSON.stringify(this.kept, null, 2) + '\n', { durability: 'fsync-file-and-folder', mode: 0o600 });
  }

  /**
   * A listen failure said for a person: an address in use names the listener, says whether the address
   * was kept (and why), and the flag that chooses another; anything else is returned as is.
   */
  explain(which: KeptListener, listen: string, err: unknown, kept: boolean): Error {
    const e = err as NodeJS.ErrnoException;
    if (e?.code !== 'EADDRINUSE') return err as Error;
    const { what, flag } = LISTENERS[which];
    const why = kept ? `, kept from an earlier start in ${this.file} so that ${which === 'service' ? 'share links, preview and download URLs' : 'the status page\'s address'} stay valid,` : '';
    return new AddressInUseError(`${what}'s address ${listen}${why} is in use (another cloudlib up, or another program): stop that, or choose another address with ${flag}`);
  }
}

/** The same message for an address given explicitly. */
export function explainListenError(which: KeptListener, listen: string, err: unknown): Error {
  const e = err as NodeJS.ErrnoException;
  if (e?.code !== 'EADDRINUSE') return err as Error;
  const { what, flag } = LISTENERS[which];
  return new AddressInUseError(`${what}'s address ${listen} is in use (another cloudlib up, or another program): stop that, or choose another address with ${flag}`);
}
