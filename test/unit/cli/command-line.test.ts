/** The commands the banner prints: the `cloudlib` word only where it is this checkout's command. */
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CLOUDLIB_BIN, cloudlibCommand, shellWord } from '../../../src/cli/command-line.js';
import { connectableUrl } from '../../../src/gateway/gateway.js';

let dir: string;
beforeEach(async () => { dir = await mkdtemp(join(tmpdir(), 'cloudlib-path-')); });
afterEach(async () => rm(dir, { recursive: true, force: true }));

describe('cloudlibCommand', () => {
  it('is `cloudlib` when the PATH links that name to this bin/cloudlib.js', async () => {
    await symlink(CLOUDLIB_BIN, join(dir, 'cloudlib'));
    expect(cloudlibCommand({ PATH: `/nonexistent:${dir}` })).toBe('cloudlib');
  });

  it('is `node <bin>` when `cloudlib` is missing or another program', async () => {
    expect(cloudlibCommand({ PATH: dir })).toBe(`node ${shellWord(CLOUDLIB_BIN)}`);
    await writeFile(join(dir, 'cloudlib'), '#!/bin/sh\n');
    expect(cloudlibCommand({ PATH: dir })).toBe(`node ${shellWord(CLOUDLIB_BIN)}`);
    expect(cloudlibCommand({})).toMatch(/^node /);
  });

  it('quotes what a shell would split', () => {
    expect(shellWord('/a/b.sock')).toBe('/a/b.sock');
    expect(shellWord("/my data/it's.sock")).toBe(`'/my data/it'\\''s.sock'`);
  });
});

describe('connectableUrl', () => {
  it('names the loopback address for a listener on every interface', () => {
    expect(connectableUrl('http://0.0.0.0:8080/')).toBe('http://127.0.0.1:8080/');
    expect(connectableUrl('http://0.0.0.0:9090')).toBe('http://127.0.0.1:9090');
    expect(connectableUrl('http://[::]:8080/')).toBe('http://[::1]:8080/');
    expect(connectableUrl('http://10.1.2.3:8080/')).toBe('http://10.1.2.3:8080/');
  });
});
