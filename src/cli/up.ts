/**
 * `cloudlib up`: the main job. With no configuration: the embedded service on the data folder, its
 * library as a WebDAV drive on http://127.0.0.1:8080/ and, where FUSE is usable, a mount on ./mnt, with
 * the control socket beside. Pointed at a real service by a config file, environment or flags.
 * SIGTERM/SIGINT/SIGHUP: stop accepting, flush pending uploads (bounded), unmount, exit 0.
 */
import { pino } from 'pino';
import { loadConfig, ConfigError, type GatewayConfig } from '../gateway/config.js';
import { Gateway, fuseUsable } from '../gateway/gateway.js';
import { createLogger, RecentProblems } from '../shared/log.js';
import { writeWelcome } from '../gateway/welcome.js';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { cloudlibCommand, shellWord } from './command-line.js';
import { defaultControlSocket } from '../gateway/data-folder.js';
import type { Subcommand } from './subcommand.js';

const USAGE = `Usage: cloudlib up [options]

Options:
  --config FILE          gateway configuration, TOML or JSON
                         (docs/configuration.md); or $CLOUDLIB_CONFIG
  --data DIR             data folder (journal, caches, embedded service, control
                         socket); default $CLOUDLIB_HOME, else
                         ~/.local/share/cloudlib (found by ctl from anywhere)
  --webdav HOST:PORT     WebDAV listen address (default 127.0.0.1:8080; off)
  --mount DIR            FUSE mount point (default ./mnt where FUSE is usable)
  --no-mount             no FUSE mount
  --service-listen H:P   embedded service listen address (default
                         127.0.0.1:8081, another free port when taken; kept in
                         <data>/addresses.json for every later start)
  --service-url URL      the embedded service's URL as clients reach it, in
                         links, preview and download URLs (default: its listen
                         address)
  --admin-listen H:P     status page (/), /metrics and /healthz (default
                         127.0.0.1:8082, kept as the service's; 'off': none)
  --read-only            refuse every change
  --stop-flush S         on stop, seconds to wait for pending uploads (default
                         10; the rest stay journaled for the next start)
  --log-level LEVEL      trace, debug, info, warn, error (default info)
  --log-file FILE        append log lines (JSON) to FILE instead of stderr
  --bwlimit RATE         bandwidth limit of the gateway's uploads and downloads:
                         10M, 512k, or UP:DOWN as 10M:2M (default off)

Writes <data>/endpoints.json when ready. Stop with Ctrl-C, SIGTERM or SIGHUP.`;

/**
 * What `up` prints once ready: every command in it runs as printed (`cloudlib` only where that is the
 * command on the PATH; the rclone line reads the generated password from its file).
 */
export function banner(g: Gateway, config: GatewayConfig, env: NodeJS.ProcessEnv = process.env): string {
  const lines = ['', 'cloudlib is up.'];
  lines.push(`  Service:   ${g.serviceUrl}${g.service ? ` (embedded, data in ${config.data}/service)` : ''}`);
  lines.push(`  Libraries: ${g.vfs.libraryNames().join(', ')}`);
  if (g.webdavUrl) {
    lines.push(`  WebDAV:    ${g.webdavUrl}${g.webdavOnEveryInterface ? '   (on every interface: from other machines use this one\'s name or address)' : ''}`);
    // The password only on a terminal: stderr that is a file or a pipe ends up in journald and CI logs.
    if (g.webdavUser) lines.push(`  Login:     ${g.webdavUser.name} / ${process.stderr.isTTY ? g.webdavUser.password : `(password in ${join(config.data, 'webdav-user.json')})`}`);
    else if (config.webdav.users.length) lines.push(`  Login:     the users of the configuration (${config.webdav.users.map((u) => u.name).join(', ')})`);
  }
  if (g.mount) lines.push(`  Mount:     ${g.mount.mountpoint}`);
  // The default socket is found from any folder: no --socket to carry around then.
  const socket = g.control.socketPath === defaultControlSocket(env) ? '' : ` --socket ${shellWord(g.control.socketPath)}`;
  lines.push(`  Control:   ${cloudlibCommand(env)} ctl${socket} status`);
  if (g.adminUrl) lines.push(`  Status:    ${g.adminUrl}/   (metrics: ${g.adminUrl}/metrics)`);
  if (g.webdavUrl) {
    const u = g.webdavUrl.replace(/\/$/, '');
    lines.push('', 'Connect:');
    lines.push(`  Windows:   net use Z: ${u} /user:${g.webdavUser?.name ?? 'USER'} *   (or Explorer → Map network drive)`);
    lines.push(`  macOS:     Finder → Go → Connect to Server → ${u}`);
    lines.push(`  Linux:     Files → Other Locations → ${u.replace(/^http/, 'dav')}`);
    if (g.webdavUser) {
      // rclone takes the password obscured; read from the file it is kept in, never printed here. The
      // owncloud vendor reads the SHA-1 checksums and sends each file's time (X-OC-Mtime) on upload.
      const file = resolve(config.data, 'webdav-user.json');
      const password = `node -p "require(${JSON.stringify(file).replace(/"/g, "'")}).password"`;
      lines.push(`  rclone:    rclone lsd :webdav: --webdav-url ${u}/ --webdav-vendor owncloud --webdav-user ${shellWord(g.webdavUser.name)} --webdav-pass "$(${password} | rclone obscure -)"`);
    }
  }
  lines.push('', 'Ctrl-C stops (pending uploads are flushed first).', '');
  return lines.join('\n');
}

export const upCommand: Subcommand = {
  summary: 'Serve every library as a WebDAV drive and a FUSE mount (embedded service\nby default).',
  usage: USAGE,
  options: {
    config: { type: 'string' },
    data: { type: 'string' },
    webdav: { type: 'string' },
    mount: { type: 'string' },
    'no-mount': { type: 'boolean' },
    'service-listen': { type: 'string' },
    'service-url': { type: 'string' },
    'admin-listen': { type: 'string' },
    'read-only': { type: 'boolean' },
    'stop-flush': { type: 'string' },
    'log-level': { type: 'string' },
    'log-file': { type: 'string' },
    bwlimit: { type: 'string' },
  },
  async run(values, positionals) {
    if (positionals.length > 0) {
      process.stderr.write(`cloudlib up: unexpected argument '${positionals[0]}'\n\n${USAGE}\n`);
      return 2;
    }
    let config: GatewayConfig;
    let stopFlushMs = 10_000;
    const usable = await fuseUsable();
    try {
      const admin = values['admin-listen'] as string | undefined;
      config = await loadConfig({
        config: values.config as string | undefined,
        data: values.data as string | undefined,
        webdav: values.webdav as string | undefined,
        mount: values.mount as string | undefined,
        noMount: values['no-mount'] as boolean | undefined,
        serviceListen: values['service-listen'] as string | undefined,
        serviceUrl: values['service-url'] as string | undefined,
        adminListen: admin === 'off' ? undefined : admin,
        logLevel: values['log-level'] as string | undefined, logFile: values['log-file'] as string | undefined, bwlimit: values.bwlimit as string | undefined,
        readOnly: values['read-only'] as boolean | undefined,
      }, process.env, { fuseUsable: usable });
      if (admin === 'off') config.admin_listen = null;
      if (values['stop-flush'] !== undefined) {
        const s = Number(values['stop-flush']);
        if (!(Number.isFinite(s) && s >= 0)) throw new ConfigError(`--stop-flush: expected seconds >= 0, got '${String(values['stop-flush'])}'`);
        stopFlushMs = s * 1000;
      }
      if (config.mount.path && !usable) {
        throw new ConfigError(`mount ${config.mount.path}: FUSE is not usable on this machine (needs /dev/fuse, libfuse 3 and the engine built by scripts/bootstrap); use --no-mount`);
      }
    } catch (err) {
      if (err instanceof ConfigError) {
        process.stderr.write(`cloudlib up: ${err.message}\n`);
        return 2;
      }
      throw err;
    }
    // Earlier versions kept the data in ./.cloudlib of the folder `up` ran in: said once, never moved.
    if (values.data === undefined && !process.env.CLOUDLIB_HOME && resolve('.cloudlib') !== config.data && existsSync(join('.cloudlib', 'service'))) {
      process.stderr.write(`cloudlib up: ./.cloudlib holds data of an earlier start in this folder; this start uses ${config.data}. \`cloudlib up --data .cloudlib\` serves the old one.\n`);
    }
    const problems = new RecentProblems();
    const logger = createLogger({ level: config.log.level, file: config.log.file, problems });
    // A fresh embedded service: its demo library gets a welcome file (once; deleting it is for good).
    const freshDemo = !config.service && !existsSync(join(config.data, 'service', 'credentials.json'));
    // Signals are taken from before the start: a stop asked for while starting (or right after
    // endpoints.json appears) is a clean stop once the start is done, never the default kill.
    let asked: string | undefined;
    let wake: ((signal: string) => void) | undefined;
    const onSignal = (signal: string): void => {
      if (asked) return;
      asked = signal;
      wake?.(signal);
    };
    for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(s, () => onSignal(s));
    let gateway: Gateway;
    try {
      gateway = await Gateway.start({ config, logger, stopFlushMs, problems });
      const demo = gateway.vfs.libraryNames()[0];
      if (freshDemo && demo) await writeWelcome(gateway.vfs, demo).catch((err: Error) => logger.warn({ err: err.message }, 'the welcome file was not written'));
    } catch (err) {
      logger.error({ err: (err as Error).message }, 'cloudlib up: start failed');
      process.stderr.write(`cloudlib up: ${(err as Error).message}\n`);
      return 1;
    }
    process.stderr.write(banner(gateway, config));
    // SIGHUP (the terminal closed) stops cleanly like SIGTERM: uploads flushed, mount released.
    const signal = asked ?? (await new Promise<string>((resolve) => { wake = resolve; }));
    if (signal === 'SIGHUP') {
      // The terminal is gone: writing to it fails (EIO); that must not end the stop half-way.
      (logger as unknown as Record<symbol, NodeJS.EventEmitter | undefined>)[pino.symbols.streamSym]?.on('error', () => undefined);
      process.stderr.on('error', () => undefined);
    }
    logger.info({ signal }, 'cloudlib up: stopping');
    // Said at once: the wait for pending uploads is otherwise a silent pause of up to --stop-flush.
    const now = gateway.vfs.status();
    const pending = Math.max(now.uploads.length, now.localFiles);
    const seconds = stopFlushMs / 1000;
    const said = pending > 0
      ? `cloudlib up: stopping; waiting up to ${seconds} s for ${pending} file${pending === 1 ? '' : 's'} to reach the service (Ctrl-C again: leave them in the journal for the next start)\n`
      : 'cloudlib up: stopping\n';
    try { process.stderr.write(said); } catch { /* the terminal is gone (SIGHUP) */ }
    // A second signal while stopping: stop waiting for uploads (they stay journaled) and leave.
    const hard = (): void => { logger.warn('second signal: exiting now; pending uploads stay in the journal'); process.exit(1); };
    process.once('SIGINT', hard);
    process.once('SIGTERM', hard);
    process.on('SIGHUP', () => undefined);
    await gateway.stop();
    // Everything the gateway owns is stopped. Something still holding the process (a FUSE session whose
    // mount was taken away from under it, e.g. by fusermount -uz) must not keep it running.
    setTimeout(() => {
      logger.warn('stopped, but something still holds the process; exiting');
      process.exit();
    }, 2000).unref();
    return 0;
  },
};
