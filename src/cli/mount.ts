/**
 * `cloudlib mount MOUNTPOINT`: serves every library of the configured service as folders of a FUSE
 * mount, until SIGINT/SIGTERM (then: open files flushed to the upload journal, pending uploads given a
 * bounded time to reach the service, unmount). A mount left behind by a crash is cleared on start.
 */
import { loadConfig, ConfigError, type GatewayConfig } from '../gateway/config.js';
import { createLogger, type Logger } from '../shared/log.js';
import { StopSignals } from '../shared/stop-signals.js';
import type { Vfs } from '../vfs/types.js';
import { mountVfs } from '../fuse/index.js';
import type { Subcommand } from './subcommand.js';
import { startStandaloneControl, type StandaloneControl } from '../gateway/standalone-control.js';
import { controlSocketOf } from '../gateway/data-folder.js';
import { makePrivateFolder } from '../gateway/private-folder.js';
import { ServiceUnreachableAtStart } from '../gateway/vfs-from-config.js';
import { cloudlibCommand, shellWord } from './command-line.js';

const USAGE = `Usage: cloudlib mount MOUNTPOINT [options]

Options:
  --config FILE        gateway configuration (TOML or JSON)
  --data DIR           data folder (journal, caches, control socket); default
                       $CLOUDLIB_HOME, else ~/.local/share/cloudlib
  --uid N, --gid N     owner shown for every file (default: this process)
  --umask OCTAL        permission bits cleared (default 022)
  --allow-other        let other users use the mount
  --read-only          refuse every change (EROFS)
  --attr-timeout S     seconds the kernel trusts names and attributes (default:
                       the feed interval)
  --log-level LEVEL    trace, debug, info, warn, error (default info)
  --log-file FILE      append log lines (JSON) to FILE instead of stderr
  --bwlimit RATE       bandwidth limit of uploads and downloads: 10M, 512k,
                       or UP:DOWN as 10M:2M (default off)`;

function intOption(value: unknown, what: string, radix = 10): number | undefined {
  if (value === undefined) return undefined;
  const text = String(value);
  const n = radix === 8 ? Number.parseInt(text, 8) : Number(text);
  if (!/^\d+$/.test(text) || !Number.isInteger(n) || (radix === 8 && /[89]/.test(text))) {
    throw new ConfigError(`${what}: expected ${radix === 8 ? 'an octal number like 022' : 'a whole number'}, got '${text}'`);
  }
  return n;
}

/**
 * The gateway core for a configuration and the libraries it serves. Loaded on demand: the module exports
 * `vfsFromConfig(config, logger) → Promise<{ vfs, libraries }>`.
 */
async function openVfs(config: GatewayConfig, logger: Logger) {
  const { vfsFromConfig } = await import('../gateway/vfs-from-config.js');
  return vfsFromConfig(config, logger);
}

/** Member sessions over the configuration's libraries (mount.member). */
async function openMemberSessions(config: GatewayConfig, served: Awaited<ReturnType<typeof openVfs>>, logger: Logger) {
  const { startMemberSessions } = await import('../gateway/member-setup.js');
  return startMemberSessions({
    config, baseUrl: config.service!.base_url, uploadHeaderPrefix: config.service!.upload_header_prefix, application: config.service!.application,
    libraries: () => served.libraries, logger: logger.child({ part: 'members' }), bandwidth: served.bandwidth,
  });
}

export const mountCommand: Subcommand = {
  summary: 'Mount every library as a folder of a FUSE mount point',
  usage: USAGE,
  options: {
    config: { type: 'string' },
    data: { type: 'string' },
    uid: { type: 'string' },
    gid: { type: 'string' },
    umask: { type: 'string' },
    'allow-other': { type: 'boolean' },
    'read-only': { type: 'boolean' },
    'attr-timeout': { type: 'string' },
    'log-level': { type: 'string' },
    'log-file': { type: 'string' },
    bwlimit: { type: 'string' },
  },
  async run(values, positionals) {
    if (positionals.length !== 1) {
      process.stderr.write(`cloudlib mount: expected one MOUNTPOINT, got ${positionals.length}\n\n${USAGE}\n`);
      return 2;
    }
    let config: GatewayConfig;
    let uid: number | undefined, gid: number | undefined, umask: number | undefined, attrTimeoutS: number | undefined;
    try {
      config = await loadConfig(
        { config: values.config as string | undefined, data: values.data as string | undefined, mount: positionals[0], logLevel: values['log-level'] as string | undefined, logFile: values['log-file'] as string | undefined, bwlimit: values.bwlimit as string | undefined, readOnly: values['read-only'] as boolean | undefined },
        process.env,
        { fuseUsable: true },
      );
      uid = intOption(values.uid, '--uid') ?? config.mount.uid;
      gid = intOption(values.gid, '--gid') ?? config.mount.gid;
      umask = intOption(values.umask, '--umask', 8) ?? config.mount.umask;
      const t = values['attr-timeout'];
      if (t !== undefined && !(Number(t) >= 0)) throw new ConfigError(`--attr-timeout: expected seconds >= 0, got '${String(t)}'`);
      attrTimeoutS = t !== undefined ? Number(t) : config.feed.interval_ms / 1000;
      if (config.mount.member !== undefined && !config.service?.application) {
        throw new ConfigError('mount.member: the application the gateway asks the token endpoint as is needed too (service.application.client_id and client_secret)');
      }
    } catch (err) {
      if (err instanceof ConfigError) {
        process.stderr.write(`cloudlib mount: ${err.message}\n`);
        return 2;
      }
      throw err;
    }
    const logger = createLogger({ level: config.log.level, file: config.log.file });
    // Caught from here: a signal while the gateway starts unmounts it once mounted, never halfway.
    const stopSignals = new StopSignals(['SIGINT', 'SIGTERM']);
    await makePrivateFolder(config.data, logger);
    let opened: Awaited<ReturnType<typeof openVfs>>;
    try {
      opened = await openVfs(config, logger);
    } catch (err) {
      // The service away at a first start: one line, no stack (served-libraries.ts).
      if (!(err instanceof ServiceUnreachableAtStart)) throw err;
      process.stderr.write(`cloudlib mount: ${err.message}\n`);
      return 1;
    }
    const vfs: Vfs = opened.vfs;
    // mount.member: the mount acts as that member, through a Vfs of their own.
    const members = config.mount.member !== undefined ? await openMemberSessions(config, opened, logger) : undefined;
    const served = members ? (await members.pinned(config.mount.member!, config.mount.member_password!)).vfs : vfs;
    // The control socket: pending uploads seen and flushed with `cloudlib ctl`, as with `cloudlib up`.
    let mountpoint: string | null = null;
    let control: StandaloneControl;
    try {
      control = await startStandaloneControl({ command: 'mount', config, vfs: opened.vfs, libraries: () => opened.libraries, logger, describe: () => ({ webdav_url: null, mount: mountpoint, control_socket: controlSocketOf(config.data) }) });
    } catch (err) {
      process.stderr.write(`cloudlib mount: ${(err as Error).message}\n`);
      await members?.close();
      await vfs.close();
      return 1;
    }
    const mounted = await mountVfs({
      vfs: served,
      mountpoint: positionals[0]!,
      uid,
      gid,
      umask,
      allowOther: !!values['allow-other'] || config.mount.allow_other,
      readOnly: config.mount.read_only,
      transport: config.mount.transport,
      ringDepth: config.mount.ring_depth,
      writeMode: config.mount.write_mode,
      links: config.mount.links,
      attrTimeoutS,
      logger,
    });
    mountpoint = mounted.mountpoint;
    process.stderr.write(`cloudlib: mounted on ${mounted.mountpoint}; control: ${cloudlibCommand()} ctl --socket ${shellWord(control.socketPath)} status; Ctrl-C to unmount\n`);
    logger.info({ signal: await stopSignals.received() }, 'cloudlib mount: stopping');
    await mounted.unmount();
    await control.close();
    await members?.close();
    await vfs.close();
    return 0;
  },
};
