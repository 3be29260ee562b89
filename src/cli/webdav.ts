/**
 * `cloudlib webdav --listen HOST:PORT`: serves every library of the configured (remote) service as a
 * WebDAV drive, until SIGINT/SIGTERM/SIGHUP (then: held files committed, pending uploads given a bounded time to
 * reach the service). `cloudlib up` serves the same front end together with the embedded service.
 */
import { join } from 'node:path';
import { loadConfig, ConfigError, parseHostPort, webdavLimitsOf, type GatewayConfig } from '../gateway/config.js';
import { makePrivateFolder } from '../gateway/private-folder.js';
import { createLogger } from '../shared/log.js';
import { StopSignals } from '../shared/stop-signals.js';
import { ServiceUnreachableAtStart, vfsFromConfig } from '../gateway/vfs-from-config.js';
import { startMemberSessions, wantsMembers, webdavMemberHooks } from '../gateway/member-setup.js';
import { createWebdavServer, type WebdavServerOptions } from '../webdav/index.js';
import type { Subcommand } from './subcommand.js';
import { startStandaloneControl, type StandaloneControl } from '../gateway/standalone-control.js';
import { controlSocketOf } from '../gateway/data-folder.js';
import { cloudlibCommand, shellWord } from './command-line.js';

const USAGE = `Usage: cloudlib webdav [options]

Options:
  --listen HOST:PORT   address to serve (default 127.0.0.1:8080, or
                       webdav.listen of the configuration)
  --config FILE        gateway configuration (TOML or JSON): service, libraries,
                       webdav.users
  --data DIR           data folder (journal, caches, properties, locks, control
                       socket); default $CLOUDLIB_HOME, else
                       ~/.local/share/cloudlib
  --read-only          refuse every change
  --log-level LEVEL    trace, debug, info, warn, error (default info)
  --log-file FILE      append log lines (JSON) to FILE instead of stderr
  --bwlimit RATE       bandwidth limit of uploads and downloads: 10M, 512k,
                       or UP:DOWN as 10M:2M (default off)`;

export const webdavCommand: Subcommand = {
  summary: 'Serve every library as a WebDAV drive (remote service from the configuration)',
  usage: USAGE,
  options: {
    listen: { type: 'string' },
    config: { type: 'string' },
    data: { type: 'string' },
    'read-only': { type: 'boolean' },
    'log-level': { type: 'string' },
    'log-file': { type: 'string' },
    bwlimit: { type: 'string' },
  },
  async run(values, positionals) {
    if (positionals.length !== 0) {
      process.stderr.write(`cloudlib webdav: expected no arguments, got ${positionals.length}\n\n${USAGE}\n`);
      return 2;
    }
    let config: GatewayConfig;
    let host: string, port: number;
    try {
      config = await loadConfig(
        { config: values.config as string | undefined, data: values.data as string | undefined, webdav: values.listen as string | undefined, logLevel: values['log-level'] as string | undefined, logFile: values['log-file'] as string | undefined, bwlimit: values.bwlimit as string | undefined, readOnly: values['read-only'] as boolean | undefined, noMount: true },
        process.env,
        { fuseUsable: false },
      );
      if (!config.webdav.listen) throw new ConfigError('--listen: expected HOST:PORT, got off');
      ({ host, port } = parseHostPort(config.webdav.listen, '--listen'));
      if (wantsMembers(config) && !config.service?.application) {
        throw new ConfigError('webdav.member_logins and webdav.users[].member: the application the gateway asks the token endpoint as is needed too (service.application.client_id and client_secret)');
      }
      if (config.webdav.users.length === 0 && !config.webdav.anonymous && !config.webdav.member_logins) {
        throw new ConfigError('webdav.users: expected at least one user (or webdav.anonymous, or webdav.member_logins) in the configuration, got none');
      }
    } catch (err) {
      if (err instanceof ConfigError) {
        process.stderr.write(`cloudlib webdav: ${err.message}\n`);
        return 2;
      }
      throw err;
    }
    const logger = createLogger({ level: config.log.level, file: config.log.file });
    // Caught from here: a signal while the gateway starts stops it once it serves, never halfway. The
    // terminal closing (SIGHUP) stops it the same way (held files committed, uploads given their time).
    const stopSignals = new StopSignals(['SIGINT', 'SIGTERM', 'SIGHUP']);
    await makePrivateFolder(config.data, logger);
    let opened: Awaited<ReturnType<typeof vfsFromConfig>>;
    try {
      opened = await vfsFromConfig(config, logger);
    } catch (err) {
      // The service away at a first start: one line, no stack (served-libraries.ts).
      if (!(err instanceof ServiceUnreachableAtStart)) throw err;
      process.stderr.write(`cloudlib webdav: ${err.message}\n`);
      return 1;
    }
    const { vfs, libraries } = opened;
    // Members acting as themselves (webdav.member_logins, users with `member`): a Vfs of their own each.
    const members = wantsMembers(config)
      ? startMemberSessions({ config, baseUrl: config.service!.base_url, uploadHeaderPrefix: config.service!.upload_header_prefix, application: config.service!.application, libraries: () => libraries, logger: logger.child({ part: 'members' }), bandwidth: opened.bandwidth })
      : undefined;
    const server = createWebdavServer({
      memberLogins: members ? webdavMemberHooks(members, config) : undefined,
      ...(webdavLimitsOf(config.webdav) as Partial<WebdavServerOptions>),
      vfs,
      users: config.webdav.users.map((u) => ({ name: u.name, password: u.password, opId: u.op_id, opName: u.op_name, readOnly: u.read_only || config.mount.read_only })),
      anonymous: config.webdav.anonymous === false ? false : { readOnly: config.webdav.anonymous === 'read-only' || config.mount.read_only },
      keepJunkLocal: config.webdav.keep_junk_local,
      dataDir: join(config.data, 'webdav'),
      logger: logger.child({ part: 'webdav' }),
    });
    // The control socket: pending uploads seen and flushed with `cloudlib ctl`, as with `cloudlib up`.
    let url: string | null = null;
    let control: StandaloneControl;
    try {
      control = await startStandaloneControl({ command: 'webdav', config, vfs, libraries: () => libraries, logger, describe: () => ({ webdav_url: url, mount: null, control_socket: controlSocketOf(config.data) }) });
    } catch (err) {
      process.stderr.write(`cloudlib webdav: ${(err as Error).message}\n`);
      await members?.close();
      await vfs.close();
      return 1;
    }
    url = await server.listen(host, port);
    process.stderr.write(`cloudlib: WebDAV on ${url}; control: ${cloudlibCommand()} ctl --socket ${shellWord(control.socketPath)} status; Ctrl-C to stop\n`);
    logger.info({ signal: await stopSignals.received() }, 'cloudlib webdav: stopping');
    await server.close();
    await members?.close();
    await vfs.flushAll({ timeoutMs: 10_000 }).catch(() => undefined);
    await control.close();
    await vfs.close();
    return 0;
  },
};
