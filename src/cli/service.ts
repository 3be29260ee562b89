/**
 * `cloudlib service`: runs the embedded service in the foreground until SIGTERM or SIGINT.
 */
import { readFile } from 'node:fs/promises';
import { createLogger } from '../shared/log.js';
import { StopSignals } from '../shared/stop-signals.js';
import type { Subcommand } from './subcommand.js';
import { REPLAY_POLICIES, type ReplayPolicy } from '../service/http/auth.js';
import { SERVICE_ADMIN_OPTIONS, SERVICE_ADMIN_USAGE, runServiceAdmin } from './service-token.js';

export const serviceCommand: Subcommand = {
  summary: 'Run the embedded cloud file library service in the foreground.',
  usage: [
    'Usage: cloudlib service --data DIR [--metadata URL] [--blobs URL]',
    '                        [--upload-staging DIR]',
    '                        [--listen HOST:PORT] [--public-url URL]',
    '                        [--tls-cert FILE --tls-key FILE]',
    '                        [--replay-policy address|strict|off]',
    '                        [--log-level LEVEL]',
    '',
    '  --data DIR          data folder (created; reused on later starts);',
    '                      DIR/credentials.json is written (mode 0600) once ready',
    '  --metadata URL      where metadata lives: postgresql://USER@HOST:PORT/DB,',
    '                      shared by every process of the service (default SQLite',
    '                      in DIR/service.db); the password comes from PGPASSWORD',
    '                      or a password file (PGPASSFILE), never the command line',
    '  --blobs URL         where file content lives: file:///FOLDER (default',
    '                      file://DIR/blobs) or s3://BUCKET?endpoint=URL[&region=R',
    '                      &prefix=P&part_size_mb=N], an S3-compatible store; its',
    '                      credentials come from AWS_ACCESS_KEY_ID and',
    '                      AWS_SECRET_ACCESS_KEY, or AWS_SHARED_CREDENTIALS_FILE;',
    '                      never from the command line',
    '  --upload-staging DIR',
    '                      folder of chunked uploads in progress, with a file://',
    '                      blob store only (default DIR/tmp/upload/sessions); every',
    '                      process of one service names the same folder; with',
    '                      s3:// they are staged in the bucket',
    '  --listen HOST:PORT  address to listen on (default 127.0.0.1:8900; port 0 = any',
    '                      free port)',
    '  --tls-cert FILE     serve HTTPS with this certificate (PEM); needs --tls-key',
    '  --tls-key FILE      private key of --tls-cert (PEM)',
    '  --public-url URL    address clients use when a proxy is in front (e.g.',
    '                      https://files.example.com); links and credentials.json',
    '                      carry it',
    '  --replay-policy P   a signature already used for another endpoint: address',
    '                      (default) accepts it from the address that first used',
    '                      it; strict refuses it on calls that change state',
    '                      (breaks same-second call sequences of the SDKs); off',
    '  --log-level LEVEL   pino level (default info)',
    '',
    'Request signatures cover parameter values only: off the local machine, serve',
    'over HTTPS (--tls-cert) or behind a TLS-terminating proxy (--public-url).',
  ].join('\n') + '\n' + SERVICE_ADMIN_USAGE,
  options: {
    data: { type: 'string' },
    blobs: { type: 'string' },
    metadata: { type: 'string' },
    'upload-staging': { type: 'string' },
    listen: { type: 'string' },
    'tls-cert': { type: 'string' },
    'tls-key': { type: 'string' },
    'public-url': { type: 'string' },
    'replay-policy': { type: 'string' },
    'log-level': { type: 'string' },
    ...SERVICE_ADMIN_OPTIONS,
  },
  async run(values, positionals) {
    if (positionals.length > 0) return runServiceAdmin(positionals[0]!, values);
    const data = values.data;
    if (typeof data !== 'string' || data === '') {
      process.stderr.write('cloudlib service: --data DIR is required\n');
      return 2;
    }
    const certFile = typeof values['tls-cert'] === 'string' ? values['tls-cert'] : undefined;
    const keyFile = typeof values['tls-key'] === 'string' ? values['tls-key'] : undefined;
    if ((certFile === undefined) !== (keyFile === undefined)) {
      process.stderr.write('cloudlib service: --tls-cert and --tls-key go together\n');
      return 2;
    }
    let tls: { cert: Buffer; key: Buffer } | undefined;
    if (certFile !== undefined && keyFile !== undefined) {
      try {
        tls = { cert: await readFile(certFile), key: await readFile(keyFile) };
      } catch (err) {
        process.stderr.write(`cloudlib service: reading the TLS certificate or key: ${(err as Error).message}\n`);
        return 2;
      }
    }
    const replayPolicy = values['replay-policy'];
    if (replayPolicy !== undefined && !REPLAY_POLICIES.includes(replayPolicy as ReplayPolicy)) {
      process.stderr.write(`cloudlib service: --replay-policy is one of ${REPLAY_POLICIES.join(', ')}, not ${String(replayPolicy)}\n`);
      return 2;
    }
    // Caught from here: a signal while the service starts stops it once started.
    const stopSignals = new StopSignals(['SIGTERM', 'SIGINT']);
    const publicUrl = typeof values['public-url'] === 'string' ? values['public-url'] : undefined;
    const logger = createLogger({ level: typeof values['log-level'] === 'string' ? values['log-level'] : undefined, name: 'cloudlib-service' });
    const { EmbeddedService } = await import('../service/index.js');
    let service;
    try {
      service = await EmbeddedService.start({
        dataDir: data, listen: typeof values.listen === 'string' ? values.listen : '127.0.0.1:8900', logger,
        ...(tls ? { tls } : {}), ...(publicUrl !== undefined ? { publicUrl } : {}),
        ...(typeof values.blobs === 'string' ? { blobs: values.blobs } : {}),
        ...(typeof values.metadata === 'string' ? { metadata: values.metadata } : {}),
        ...(typeof values['upload-staging'] === 'string' ? { uploadStaging: values['upload-staging'] } : {}),
        ...(replayPolicy !== undefined ? { replayPolicy: replayPolicy as ReplayPolicy } : {}),
      });
    } catch (err) {
      stopSignals.dispose();
      process.stderr.write(`cloudlib service: ${(err as Error).message}\n`);
      return 1;
    }
    process.stdout.write(`cloudlib service listening on ${service.baseUrl} (credentials in ${data}/credentials.json)\n`);
    await stopSignals.received();
    const force = setTimeout(() => {
      logger.error('service did not stop within 8 s; exiting');
      process.exit(1);
    }, 8_000);
    force.unref();
    await service.close();
    clearTimeout(force);
    return 0;
  },
};
