/**
 * Metrics in the Prometheus text exposition format (version 0.0.4): counters and gauges with labels,
 * and gauges read at scrape time from the running parts (feed lag, pending uploads, cache sizes).
 */

type Labels = Record<string, string>;

function key(labels: Labels): string {
  return Object.keys(labels).sort().map((k) => `${k}=${labels[k]}`).join(',');
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function renderLabels(labels: Labels): string {
  const ks = Object.keys(labels).sort();
  return ks.length ? `{${ks.map((k) => `${k}="${escapeLabel(labels[k]!)}"`).join(',')}}` : '';
}

export class Counter {
  private readonly values = new Map<string, { labels: Labels; value: number }>();
  constructor(readonly name: string, readonly help: string) {}

  inc(labels: Labels = {}, by = 1): void {
    if (by < 0) throw new RangeError(`counter ${this.name}: expected a non-negative increment, got ${by}`);
    const k = key(labels);
    const cur = this.values.get(k);
    if (cur) cur.value += by;
    else this.values.set(k, { labels: { ...labels }, value: by });
  }

  get(labels: Labels = {}): number {
    return this.values.get(key(labels))?.value ?? 0;
  }

  render(): string[] {
    return [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`, ...[...this.values.values()].map((v) => `${this.name}${renderLabels(v.labels)} ${v.value}`)];
  }
}

/** A gauge whose samples are read when scraped. */
export class Gauge {
  constructor(readonly name: string, readonly help: string, private readonly read: () => { labels?: Labels; value: number }[]) {}

  render(): string[] {
    let samples: { labels?: Labels; value: number }[] = [];
    try {
      samples = this.read();
    } catch {
      samples = [];
    }
    return [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} gauge`, ...samples.map((s) => `${this.name}${renderLabels(s.labels ?? {})} ${s.value}`)];
  }
}

export class MetricsRegistry {
  private readonly metrics: (Counter | Gauge)[] = [];

  counter(name: string, help: string): Counter {
    const c = new Counter(name, help);
    this.metrics.push(c);
    return c;
  }

  gauge(name: string, help: string, read: () => { labels?: Labels; value: number }[]): Gauge {
    const g = new Gauge(name, help, read);
    this.metrics.push(g);
    return g;
  }

  render(): string {
    return this.metrics.flatMap((m) => m.render()).join('\n') + '\n';
  }
}

/** The gateway's metrics. */
export class GatewayMetrics {
  readonly registry = new MetricsRegistry();
  readonly requests = this.registry.counter('cloudlib_requests_total', 'Front-end requests by front end, operation and status');
  readonly bytesRead = this.registry.counter('cloudlib_bytes_read_total', 'Bytes served to clients, by front end');
  readonly bytesWritten = this.registry.counter('cloudlib_bytes_written_total', 'Bytes received from clients, by front end');
  readonly serviceRequests = this.registry.counter('cloudlib_service_requests_total', 'Calls to the service by endpoint and HTTP status (0 = no answer)');
  readonly serviceSeconds = this.registry.counter('cloudlib_service_request_seconds_total', 'Time spent in calls to the service, by endpoint');

  /** Counts one exchange with the service (a ServiceClient `onExchange` observer). */
  readonly observeExchange = (e: { endpoint: string; status: number; ms: number }): void => {
    this.serviceRequests.inc({ endpoint: e.endpoint, status: String(e.status) });
    this.serviceSeconds.inc({ endpoint: e.endpoint }, e.ms / 1000);
  };
}
