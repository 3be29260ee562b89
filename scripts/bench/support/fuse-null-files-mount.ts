/**
 * The ceiling of small files through a FUSE mount on this machine: the engine's null file system
 * (`nullFiles`, native/fuse3, built only into the `fuse3_bench` addon), which keeps names, folders and
 * sizes in memory and answers every request on its reader thread without reaching JavaScript or storing
 * a byte. Mounted with the options and session settings of `cloudlib mount` (default_permissions, the
 * writeback cache), so `cp -r` into it costs what the kernel and the engine cost alone. Run in a child
 * process of the FUSE benchmark (a process serving a mount must never make a synchronous call on it):
 * argv MOUNTPOINT [auto|dev] [backing] (the transport, default auto: over io_uring when the kernel
 * offers it); prints `mounted`, and on SIGTERM `transport {…}` (the engine's TransportState), then
 * unmounts.
 *
 * `backing`: shaped as a passthrough mount instead (no writeback cache; passthrough asked for), each
 * create answered with a backing file, in turn one of BACKING_FILES files made beforehand in a folder
 * beside the mount point (printed as `backing PATH` before `mounted`; removed at the end), as the mount
 * answers it with a spool.
 */
import { mkdir, open, rm } from 'node:fs/promises';
import { loadFuse3Binding, type NativeSession } from '../../../src/fuse/engine/binding.js';
import { FUSE3_SETTINGS } from '../../../src/fuse/mount.js';

const BACKING_FILES = 2048;

const [mountpoint, transport = 'auto', shape = 'writeback'] = process.argv.slice(2);
if (!mountpoint || (transport !== 'auto' && transport !== 'dev') || (shape !== 'writeback' && shape !== 'backing')) {
  throw new Error('usage: fuse-null-files-mount.ts MOUNTPOINT [auto|dev] [backing]');
}
const backing = shape === 'backing' ? `${mountpoint.replace(/\/+$/, '')}.backing` : undefined;

// The benchmark's addon: the production one is built without the null file system.
const fuse = loadFuse3Binding('fuse3_bench');
await mkdir(mountpoint, { recursive: true });
if (backing) {
  await mkdir(backing, { recursive: true });
  for (let i = 0; i < BACKING_FILES; i++) await (await open(`${backing}/${i}`, 'w')).close();
}
// Only INIT and END reach JavaScript; nothing to answer.
const settings = backing ? { writeback: 0, passthrough: 1 } : { writeback: 1 };
const session: NativeSession = fuse.mount(mountpoint, ['-o', 'fsname=cloudlib-null,default_permissions'], { ...FUSE3_SETTINGS, ...settings, asyncRead: 1, readers: 1, nullFiles: 1, transport: transport === 'dev' ? 0 : 1 }, () => undefined);
if (backing) {
  fuse.spoolFolder(session, backing);
  process.stdout.write(`backing ${backing}\n`);
}
process.stdout.write('mounted\n');
process.once('SIGTERM', () => {
  process.stdout.write(`transport ${JSON.stringify(fuse.transport(session))}\n`);
  void fuse.unmount(session).then(async () => {
    fuse.destroy(session);
    if (backing) await rm(backing, { recursive: true, force: true });
    process.exit(0);
  });
});
