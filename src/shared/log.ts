/** Structured logging (pino). Secrets are redacted by key wherever they appear in a logged object. */
import { pino, type Logger } from 'pino';

export type { Logger };

export const REDACT_KEYS = [
  'sign', 'token', 'secret', 'password', 'client_secret', 'org_client_secret', 'refresh_token', 'access_token', 'key', 'authorization',
];

export function createLogger(opts: { level?: string; name?: string; destination?: NodeJS.WritableStream | number } = {}): Logger {
  const level = opts.level ?? process.env.CLOUDLIB_LOG_LEVEL ?? 'info';
  const paths = REDACT_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `headers.${k}`]);
  return pino(
    { name: opts.name ?? 'cloudlib', level, redact: { paths, censor: '[redacted]' }, base: undefined },
    pino.destination(typeof opts.destination === 'number' ? opts.destination : 2),
  );
}

/** A logger that drops everything (tests, library use). */
export const silentLogger: Logger = pino({ level: 'silent' });
