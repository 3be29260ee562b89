/**
 * The ceiling of small files through a FUSE mount on this machine: the engine's null file system
 * (`nullFiles`, native/fuse3), which keeps names, folders and sizes in memory and answers every request
 * on its reader thread without reaching JavaScript or storing a byte. Mounted with the options and
 * session settings of `cloudlib mount` (default_permissions, the writeback cache), so `cp -r` into it
 * costs what the kernel and the engine cost alone. Run in a child process of the FUSE benchmark (a
 * process serving a mount must never make a synchronous call on it): argv MOUNTPOINT [auto|dev] (the
 * transport, default auto: over io_uring when the kernel offers it); prints `mounted`, and on SIGTERM
 * `transport {…}` (the engine's TransportState), then unmounts.
 */
import { mkdir } from 'node:fs/promises';
import { loadFuse3Binding, type NativeSession } from '../../../src/fuse/engine/binding.js';
import { FUSE3_SETTINGS } from '../../../src/fuse/mount.js';

const [mountpoint, transport = 'auto'] = process.argv.slice(2);
if (!mountpoint || (transport !== 'auto' && transport !== 'dev')) throw new Error('usage: fuse-null-files-mount.ts MOUNTPOINT [auto|dev]');

const fuse = loadFuse3Binding();
await mkdir(mountpoint, { recursive: true });
// Only INIT and END reach JavaScript; nothing to answer.
const session: NativeSession = fuse.mount(mountpoint, ['-o', 'fsname=cloudlib-null,default_permissions'], { ...FUSE3_SETTINGS, writeback: 1, asyncRead: 1, readers: 1, nullFiles: 1, transport: transport === 'dev' ? 0 : 1 }, () => undefined);
process.stdout.write('mounted\n');
process.once('SIGTERM', () => {
  process.stdout.write(`transport ${JSON.stringify(fuse.transport(session))}\n`);
  void fuse.unmount(session).then(() => {
    fuse.destroy(session);
    process.exit(0);
  });
});
