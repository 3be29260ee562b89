/**
 * Structured logging (pino). Secrets are redacted by key wherever they appear in a logged object.
 *
 * Lines are JSON (one object a line) unless they go to a terminal: there they are printed for a person,
 * `12:03:04 WARN  part=vfs library=Demo feed poll failed` (CLOUDLIB_LOG_FORMAT=json or text chooses).
 * Keys are never repeated within a line: a child logger must not bind a key its parent binds, and a
 * logged object never has a `msg` key (the message is the second argument).
 */
import { isatty } from 'node:tty';
import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

export const REDACT_KEYS = [
  'sign', 'token', 'secret', 'password', 'client_secret', 'org_client_secret', 'refresh_token', 'access_token', 'key', 'authorization',
];

export type LogFormat = 'json' | 'text';

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/** An error as pino writes it: `{ type, message, stack }`. */
function isErrorLike(v: unknown): v is { message: string; stack?: unknown } {
  return typeof v === 'object' && v !== null && typeof (v as { message?: unknown }).message === 'string' && ('stack' in v || 'type' in v);
}

/** One pino JSON line as a line for a person: time, level, the other keys as key=value, the message. */
export function textLine(json: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const { time, level, msg, name: _name, ...rest } = o;
  const t = typeof time === 'number' ? new Date(time).toISOString().slice(11, 19) : '';
  const lv = (LEVEL_NAMES[Number(level)] ?? String(level)).padEnd(5);
  // Below the line, indented: an error's stack (errors and worse only) and the further lines of a
  // text of several, as they read, never JSON-escaped.
  const below: string[] = [];
  const fields = Object.entries(rest).map(([k, v]) => {
    let s: string;
    if (isErrorLike(v)) {
      s = v.message;
      if (Number(level) >= 50 && typeof v.stack === 'string') below.push(...v.stack.split('\n').slice(1).map((l) => l.trim()).filter(Boolean));
    } else s = typeof v === 'string' ? v : JSON.stringify(v);
    const [first, ...more] = s.split('\n');
    if (more.length) below.push(...more.filter((l) => l.trim() !== ''));
    return `${k}=${/[\s"=]/.test(first!) || first === '' ? JSON.stringify(first) : first}`;
  });
  const line = `${t} ${lv} ${[...fields, msg === undefined ? '' : String(msg)].filter(Boolean).join(' ')}\n`;
  return line + below.map((l) => `    ${l}\n`).join('');
}

/** JSON, or text where the logs go to a terminal; `CLOUDLIB_LOG_FORMAT` overrides. */
export function logFormatFor(fd: number, env: NodeJS.ProcessEnv = process.env): LogFormat {
  const f = env.CLOUDLIB_LOG_FORMAT;
  if (f === 'json' || f === 'text') return f;
  return isatty(fd) ? 'text' : 'json';
}

/** One warning or error as the status page shows it: when, how bad, what, and a few safe fields. */
export interface LoggedProblem { timeMs: number; level: 'warn' | 'error' | 'fatal'; msg: string; fields: Record<string, string> }

/** Fields kept with a LoggedProblem (never secrets: those are redacted in log lines, and not kept here at all). */
const PROBLEM_FIELDS = ['part', 'component', 'library', 'path', 'fullpath', 'err', 'error', 'code', 'status'];

/** The last warnings and errors logged (bounded), newest first, for the admin status page. */
export class RecentProblems {
  private readonly items: LoggedProblem[] = [];
  constructor(readonly capacity = 50) {}

  record(level: number, args: unknown[], bindings: Record<string, unknown> = {}): void {
    const [first, second] = args;
    const obj = first !== null && typeof first === 'object' ? { ...bindings, ...(first as Record<string, unknown>) } : bindings;
    const msg = typeof first === 'string' ? first : typeof second === 'string' ? second : '';
    const fields: Record<string, string> = {};
    for (const k of PROBLEM_FIELDS) {
      const v = obj[k];
      if (v === undefined || v === null) continue;
      fields[k] = v instanceof Error ? v.message : typeof v === 'object' ? JSON.stringify(v) : String(v);
    }
    this.items.unshift({ timeMs: Date.now(), level: level >= 60 ? 'fatal' : level >= 50 ? 'error' : 'warn', msg, fields });
    if (this.items.length > this.capacity) this.items.length = this.capacity;
  }

  list(): readonly LoggedProblem[] {
    return this.items;
  }
}

/**
 * A logger. `file`: lines appended to that file (made with its folders if missing), JSON unless
 * `format` says otherwise, instead of stderr.
 */
export function createLogger(opts: { level?: string; name?: string; destination?: NodeJS.WritableStream | number; file?: string; format?: LogFormat; problems?: RecentProblems } = {}): Logger {
  const level = opts.level ?? process.env.CLOUDLIB_LOG_LEVEL ?? 'info';
  const paths = REDACT_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `headers.${k}`]);
  const fd = typeof opts.destination === 'number' ? opts.destination : 2;
  const toFile = opts.file !== undefined || typeof opts.destination === 'object';
  const format = opts.format ?? (toFile ? 'json' : logFormatFor(fd));
  const json: DestinationStream = typeof opts.destination === 'object' ? opts.destination
    : opts.file !== undefined ? pino.destination({ dest: opts.file, append: true, mkdir: true, sync: true }) : pino.destination(fd);
  const destination: DestinationStream = format === 'json' ? json : { write: (line: string) => json.write(textLine(line)) };
  const problems = opts.problems;
  return pino({
    name: opts.name ?? 'cloudlib', level, redact: { paths, censor: '[redacted]' }, base: undefined,
    ...(problems ? {
      hooks: {
        logMethod(this: Logger, args: Parameters<Logger['info']>, method: (...a: unknown[]) => void, lv: number) {
          if (lv >= 40) problems.record(lv, args as unknown[], this.bindings());
          method.apply(this, args as unknown[]);
        },
      },
    } : {}),
  }, destination);
}

/** A logger that drops everything (tests, library use). */
export const silentLogger: Logger = pino({ level: 'silent' });
