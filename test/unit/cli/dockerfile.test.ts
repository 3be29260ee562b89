/**
 * The Dockerfile, read (no docker here): its CMD uses only flags `cloudlib up` takes and leaves the
 * mount to FUSE being usable; every listener is on all interfaces and exposed; the health check asks
 * the admin listener; it runs as an unprivileged user and runs the compiled build.
 */
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { upCommand } from '../../../src/cli/up.js';

const text = await readFile(new URL('../../../Dockerfile', import.meta.url), 'utf8');
const instruction = (name: string) => [...text.matchAll(new RegExp(`^${name} (.+)$`, 'gm'))].map((m) => m[1]!);
const cmd = JSON.parse(instruction('CMD').at(-1)!) as string[];
const flag = (name: string) => cmd[cmd.indexOf(name) + 1]!;

describe('Dockerfile', () => {
  it('CMD: `up` with its own flags, no --no-mount, every listener on all interfaces and exposed', () => {
    expect(cmd[0]).toBe('up');
    for (const a of cmd.filter((x) => x.startsWith('--'))) expect(Object.keys(upCommand.options), a).toContain(a.slice(2));
    expect(cmd).not.toContain('--no-mount');
    const exposed = instruction('EXPOSE').join(' ').split(/\s+/);
    for (const f of ['--webdav', '--service-listen', '--admin-listen']) {
      expect(flag(f), f).toMatch(/^0\.0\.0\.0:\d+$/);
      expect(exposed, f).toContain(flag(f).split(':')[1]);
    }
    expect(text).toMatch(new RegExp(`CLOUDLIB_SERVICE_URL=http://localhost:${flag('--service-listen').split(':')[1]}\\b`));
  });

  it('health check on the admin listener; an unprivileged user; the compiled build', () => {
    const port = flag('--admin-listen').split(':')[1];
    expect(text).toMatch(new RegExp(`HEALTHCHECK[\\s\\S]*127\\.0\\.0\\.1:${port}/healthz`));
    expect(instruction('USER').at(-1)).toBe('node');
    expect(text).toContain('node scripts/build.js');
    expect(text).toContain('chown node:node /data');
  });
});
