/**
 * A library whose service checks each member's writes (Remote.checkWrite): a change of a file the
 * service has is checked as a change of that file (`w`), a new file as an addition to its folder (`ul`),
 * and so is a file made here and not sent yet when it is opened or written again (LibreOffice makes its
 * temporary file and opens it a second time when it saves): the service has no such file to ask of.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GatewayVfs, MemoryRemote } from '../../../src/vfs/index.js';
import { silentLogger } from '../../../src/shared/log.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

describe('the write check of a member\'s library', () => {
  it('asks `w` of a file the service has, and a new file\'s right of one made here and not sent yet', async () => {
    const asked: string[] = [];
    const remote = Object.assign(new MemoryRemote({ name: 'M', id: '8' }), {
      checkWrite: async (fullpath: string, existing: boolean) => { asked.push(`${existing ? 'w' : 'ul'} ${fullpath}`); },
    });
    remote.putFile('there.txt', Buffer.from('on the service'));
    const dataDir = await mkdtemp(join(tmpdir(), 'cloudlib-member-write-'));
    dirs.push(dataDir);
    // Uploads wait: the new file stays unsent while it is opened again.
    const vfs = await GatewayVfs.open({ libraries: [{ name: 'M', id: '8', remote }], dataDir, feedIntervalMs: 0, logger: silentLogger, upload: { delayMs: 600_000 } });
    try {
      const made = await vfs.open('/M/lu1.tmp', { write: true, create: true, exclusive: true });
      await made.write(0, Buffer.from('temporary'));
      const again = await vfs.open('/M/lu1.tmp', { write: true });
      await again.write(9, Buffer.from(' file'));
      await again.release();
      await made.release();
      expect((await vfs.stat('/M/lu1.tmp')).size).toBe(14);
      await vfs.writeFile('/M/lu1.tmp', Buffer.from('whole'));
      const there = await vfs.open('/M/there.txt', { write: true });
      await there.release();
      expect(asked).toEqual(['ul lu1.tmp', 'ul lu1.tmp', 'ul lu1.tmp', 'w there.txt']);
    } finally {
      await vfs.close();
    }
  });
});
