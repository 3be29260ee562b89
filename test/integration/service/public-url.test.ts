/**
 * The URL the embedded service gives its clients: its listen address (never 0.0.0.0, which no client
 * can connect to), or the public URL it is told (a container's port mapping, a proxy), in credentials
 * and in the URLs it hands out.
 */
import { describe, expect, it } from 'vitest';
import { startTestService } from '../../support/service.js';

describe('embedded service URL', () => {
  it('a listener on every interface is announced on the loopback address', async () => {
    const t = await startTestService({ listen: '0.0.0.0:0' });
    try {
      expect(t.service.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(t.service.credentials.upload_server).toBe(`${t.service.baseUrl}/upload`);
    } finally {
      await t.close();
    }
  });

  it('a public URL is the base URL the service announces (credentials, upload server)', async () => {
    const t = await startTestService({ publicUrl: 'http://files.example.test:8081/' });
    try {
      expect(t.service.baseUrl).toBe('http://files.example.test:8081');
      expect(t.service.credentials.base_url).toBe('http://files.example.test:8081');
      expect(t.service.credentials.upload_server).toBe('http://files.example.test:8081/upload');
    } finally {
      await t.close();
    }
  });
});
