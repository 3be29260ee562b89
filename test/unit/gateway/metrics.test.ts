import { describe, expect, it } from 'vitest';
import { MetricsRegistry } from '../../../src/gateway/metrics.js';

describe('metrics', () => {
  it('renders counters and gauges in the Prometheus text format', () => {
    const r = new MetricsRegistry();
    const c = r.counter('x_total', 'Things');
    c.inc({ method: 'GET', status: '200' });
    c.inc({ status: '200', method: 'GET' }, 2);
    c.inc({ method: 'PUT', status: '201' });
    r.gauge('lag_ms', 'Feed lag', () => [{ labels: { library: 'a"b' }, value: 5 }]);
    const text = r.render();
    expect(text).toContain('# TYPE x_total counter');
    expect(text).toContain('x_total{method="GET",status="200"} 3');
    expect(text).toContain('x_total{method="PUT",status="201"} 1');
    expect(text).toContain('lag_ms{library="a\\"b"} 5');
    expect(() => c.inc({}, -1)).toThrow(/non-negative/);
  });
  it('keeps scraping when a gauge source throws', () => {
    const r = new MetricsRegistry();
    r.gauge('broken', 'fails', () => { throw new Error('x'); });
    expect(r.render()).toContain('# TYPE broken gauge');
  });
});
