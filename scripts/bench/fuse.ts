/**
 * FUSE front end figures, each against a baseline measured in the same run:
 * - sequential write and read of BENCH_FUSE_BYTES (default 1 GiB) with dd (1 MiB blocks) through the
 *   mount, vs the same through the Vfs directly (target ≥ 0.8×), in calls of 128 KiB (the size of the
 *   requests the kernel sends a libfuse 2 file system: the ratio is the cost of crossing FUSE) and of
 *   1 MiB (what an application in the gateway's process would use). The write is made durable on every
 *   side (dd conv=fsync; fsync + close); each file is then committed (untimed) so the reads fetch it from
 *   the service, and the mount's read is cold (page cache dropped);
 * - creating 1,000 files of 4 KiB (files/s) through the mount vs on local disk;
 * - `ls -l` of a 10,000-entry folder, warm (target < 0.5 s), vs the same on local disk;
 * - the ceiling: the same dd write and read through a fuse-native mount that answers every request at
 *   once and stores nothing (scripts/bench/support/fuse-null-mount.ts), the cost of crossing FUSE alone;
 *   and the same dd write through one that only writes each request to a local file before answering;
 * - the peer, rclone mounting our WebDAV front end (rclone's own FUSE mount, same steps).
 * The mount serves the gateway's Vfs over the embedded service in a process of its own (its data in
 * memory), as in production; BENCH_FUSE_BACKEND=memory serves the in-memory test Vfs instead.
 * Prints one JSON line per figure. Run: `node --import tsx scripts/bench/fuse.ts`.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { existsSync } from 'node:fs';
import { sh, startMount } from '../../test/e2e/fuse/harness.js';
import { recyclePages } from './support/recycle-pages.js';

const BYTES = Number(process.env.BENCH_FUSE_BYTES ?? 1024 * 1024 * 1024);
const SMALL_FILES = Number(process.env.BENCH_FUSE_SMALL_FILES ?? 1000);
const LIST_ENTRIES = Number(process.env.BENCH_FUSE_LIST_ENTRIES ?? 10_000);

function print(figure: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(figure) + '\n');
}

/**
 * dd write and read of BYTES through a mount that answers at once, or (`spool`) that answers each write
 * once it is written to a local file (see support/fuse-null-mount.ts).
 */
async function nullMountCeiling(scratch: string, spool = false): Promise<{ writeMBps: number; readMBps: number }> {
  const { spawn } = await import('node:child_process');
  const { fileURLToPath } = await import('node:url');
  const mnt = join(scratch, 'null-mnt');
  const spoolFile = join(scratch, 'null-spool.bin');
  await mkdir(mnt, { recursive: true });
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./support/fuse-null-mount.ts', import.meta.url)), mnt, String(BYTES), ...(spool ? [spoolFile] : [])], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('null mount did not come up in 30 s')), 30_000);
      child.stdout.on('data', (c: Buffer) => { if (c.toString().includes('mounted')) { clearTimeout(timer); resolve(); } });
      child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`null mount exited with ${code}`)); });
    });
    const file = join(mnt, 'f');
    const mib = BYTES / 1024 / 1024;
    const write = await timed(() => sh('dd', ['if=/dev/zero', `of=${file}`, 'bs=1M', `count=${mib}`, 'conv=notrunc,fsync'], { timeoutMs: 600_000 }));
    await sh('dd', [`if=${file}`, 'iflag=nocache', 'count=0'], { timeoutMs: 60_000 });
    const read = await timed(() => sh('dd', [`if=${file}`, 'of=/dev/null', 'bs=1M'], { timeoutMs: 600_000 }));
    return { writeMBps: BYTES / 1e6 / (write.ms / 1000), readMBps: BYTES / 1e6 / (read.ms / 1000) };
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    await sh('fusermount', ['-uz', mnt]).catch(() => undefined);
    child.kill('SIGKILL');
    await rm(spoolFile, { force: true });
  }
}

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

const round = (n: number, digits = 2): number => Number(n.toFixed(digits));

async function createSmallFiles(dir: string): Promise<number> {
  await mkdir(dir, { recursive: true });
  const data = Buffer.alloc(4096, 0x61);
  const { ms } = await timed(async () => {
    for (let i = 0; i < SMALL_FILES; i++) await writeFile(join(dir, `s${i}`), data);
  });
  return SMALL_FILES / (ms / 1000);
}

async function lsWarm(dir: string): Promise<number> {
  await sh('ls', ['-l', dir], { timeoutMs: 120_000 });
  const { ms } = await timed(() => sh('ls', ['-l', dir], { timeoutMs: 120_000 }));
  return ms / 1000;
}

/**
 * The peer: rclone (`rclone mount :webdav:`, --vfs-cache-mode writes) mounting our WebDAV front end over
 * the same kind of in-memory Vfs, with the same steps. rclone serves that mount from its own process.
 */
async function peerRcloneMount(scratch: string): Promise<void> {
  const { startMemoryDav } = await import('../../test/e2e/webdav/serve-memory.js');
  const dav = await startMemoryDav();
  // The listed folder is made before rclone mounts (rclone caches listings for minutes).
  await dav.vfs.mkdir('/Library/many');
  for (let i = 0; i < LIST_ENTRIES; i++) await (await dav.vfs.open(`/Library/many/f${String(i).padStart(5, '0')}`, { write: true, create: true })).release();
  const mnt = join(scratch, 'rclone-mnt');
  const cache = join(scratch, 'rclone-cache');
  await mkdir(mnt, { recursive: true });
  const pass = (await sh('rclone', ['obscure', 'secret'])).stdout.trim();
  const { spawn } = await import('node:child_process');
  const rclone = spawn('rclone', ['mount', ':webdav:', mnt, '--webdav-url', dav.url, '--webdav-user', 'alice', '--webdav-pass', pass, '--vfs-cache-mode', 'writes', '--cache-dir', cache], { stdio: 'ignore' });
  try {
    for (let i = 0; ; i++) {
      const mounted = (await sh('awk', ['-v', `m=${mnt}`, '$5==m{f=1} END{exit !f}', '/proc/self/mountinfo']).then(() => true, () => false));
      if (mounted) break;
      if (i > 60 || rclone.exitCode !== null) throw new Error('rclone mount did not come up');
      await new Promise((r) => setTimeout(r, 500));
    }
    const mib = BYTES / 1024 / 1024;
    const file = join(mnt, 'Library', 'dd.bin');
    const write = await timed(() => sh('dd', ['if=/dev/zero', `of=${file}`, 'bs=1M', `count=${mib}`, 'conv=fsync'], { timeoutMs: 900_000 }));
    await sh('dd', [`if=${file}`, 'iflag=nocache', 'count=0'], { timeoutMs: 60_000 });
    const read = await timed(() => sh('dd', [`if=${file}`, 'of=/dev/null', 'bs=1M'], { timeoutMs: 900_000 }));
    print({ figure: 'peer.rclone_webdav.seq_write', bytes: BYTES, MBps: round(BYTES / 1e6 / (write.ms / 1000)) });
    print({ figure: 'peer.rclone_webdav.seq_read', bytes: BYTES, MBps: round(BYTES / 1e6 / (read.ms / 1000)) });
    const files = await createSmallFiles(join(mnt, 'Library', 'small'));
    print({ figure: 'peer.rclone_webdav.create_4k_files', files: SMALL_FILES, files_per_s: round(files, 0) });
    print({ figure: 'peer.rclone_webdav.ls_l_warm', entries: LIST_ENTRIES, s: round(await lsWarm(join(mnt, 'Library', 'many')), 3) });
  } finally {
    await sh('fusermount', ['-uz', mnt]).catch(() => undefined);
    rclone.kill('SIGTERM');
    await dav.close();
    await rm(cache, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const backend = process.env.BENCH_FUSE_BACKEND ?? 'service-process';
  const h = await startMount({ mount: { attrTimeoutS: 2 }, env: { FUSE_TEST_BACKEND: backend } });
  try {
    const mib = BYTES / 1024 / 1024;
    const file = join(h.mnt, 'Lib', 'dd.bin');
    const direct: Record<string, { writeMs: number; readMs: number }> = {};
    for (const [name, chunkBytes] of [['128k', 128 * 1024], ['1m', 1024 * 1024]] as const) {
      await recyclePages(h.local, BYTES * 1.25);
      const writeMs = await h.call<number>('benchDirectWrite', { path: `/Lib/direct-${name}.bin`, bytes: BYTES, chunkBytes }, 600_000);
      await h.call('flushAll', {}, 600_000);
      direct[name] = { writeMs, readMs: 0 };
    }
    await recyclePages(h.local, BYTES * 1.25);
    const write = await timed(() => sh('dd', ['if=/dev/zero', `of=${file}`, 'bs=1M', `count=${mib}`, 'conv=fsync'], { timeoutMs: 600_000 }));
    await h.call('flushAll', {}, 600_000);
    for (const [name, chunkBytes] of [['128k', 128 * 1024], ['1m', 1024 * 1024]] as const) {
      direct[name]!.readMs = await h.call<number>('benchDirectRead', { path: `/Lib/direct-${name}.bin`, chunkBytes }, 600_000);
    }
    // Drop the file's pages so the read goes through the mount.
    await sh('dd', [`if=${file}`, 'iflag=nocache', 'count=0'], { timeoutMs: 60_000 });
    const read = await timed(() => sh('dd', [`if=${file}`, 'of=/dev/null', 'bs=1M'], { timeoutMs: 600_000 }));
    await rm(file);
    const MBps = (ms: number): number => round(BYTES / 1e6 / (ms / 1000));
    const k = direct['128k']!;
    const m = direct['1m']!;
    print({ figure: 'fuse.seq_write', backend, bytes: BYTES, mount_MBps: MBps(write.ms), vfs_128k_MBps: MBps(k.writeMs), ratio: round(k.writeMs / write.ms), vfs_1m_MBps: MBps(m.writeMs), ratio_1m: round(m.writeMs / write.ms), target: 0.8 });
    const ceiling = await nullMountCeiling(h.local);
    print({ figure: 'fuse.null_mount_ceiling', bytes: BYTES, write_MBps: round(ceiling.writeMBps), read_MBps: round(ceiling.readMBps), write_ratio_to_vfs_128k: round(ceiling.writeMBps / (BYTES / 1e6 / (k.writeMs / 1000))), read_ratio_to_vfs_128k: round(ceiling.readMBps / (BYTES / 1e6 / (k.readMs / 1000))) });
    await recyclePages(h.local, BYTES * 1.25);
    const spooled = await nullMountCeiling(h.local, true);
    print({ figure: 'fuse.spool_mount_ceiling', note: 'each write answered once written to a local file: no hash, no journal', bytes: BYTES, write_MBps: round(spooled.writeMBps), write_ratio_to_vfs_128k: round(spooled.writeMBps / (BYTES / 1e6 / (k.writeMs / 1000))) });
    print({ figure: 'fuse.seq_read_cold', backend, bytes: BYTES, mount_MBps: MBps(read.ms), vfs_128k_MBps: MBps(k.readMs), ratio: round(k.readMs / read.ms), vfs_1m_MBps: MBps(m.readMs), ratio_1m: round(m.readMs / read.ms), target: 0.8 });

    const localFiles = await createSmallFiles(join(h.local, 'small'));
    const mountFiles = await createSmallFiles(join(h.mnt, 'Lib', 'small'));
    print({ figure: 'fuse.create_4k_files', files: SMALL_FILES, mount_files_per_s: round(mountFiles, 0), local_files_per_s: round(localFiles, 0), ratio: round(mountFiles / localFiles) });

    await h.call('populate', { path: '/Lib/many', count: LIST_ENTRIES }, 600_000);
    const localDir = join(h.local, 'many');
    await mkdir(localDir);
    for (let i = 0; i < LIST_ENTRIES; i++) await writeFile(join(localDir, `f${String(i).padStart(5, '0')}`), '');
    const mountLs = await lsWarm(join(h.mnt, 'Lib', 'many'));
    const localLs = await lsWarm(localDir);
    print({ figure: 'fuse.ls_l_warm', entries: LIST_ENTRIES, mount_s: round(mountLs, 3), local_s: round(localLs, 3), target_s: 0.5 });

    if (!existsSync(new URL('../../src/webdav/index.ts', import.meta.url))) {
      print({ figure: 'peer.rclone_webdav_mount', skipped: 'the WebDAV front end is not in this build' });
    } else {
      await peerRcloneMount(h.local);
    }
  } finally {
    await h.stop();
  }
}

main().catch((err: Error) => {
  process.stderr.write(`bench fuse: ${err.stack ?? err.message}\n`);
  process.exit(1);
});
