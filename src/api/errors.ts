/**
 * The one error type of the client: what the service answered, for which endpoint. Never carries a
 * secret, a signature, or a token.
 */
export class ServiceError extends Error {
  /** HTTP status (0 when no response was received). */
  readonly status: number;
  /** The service's `error_code` (0 when the body had none). */
  readonly code: number;
  /** The service's `error_msg`, or a description of the transport failure. */
  readonly serviceMessage: string;
  /** `family.name` of the endpoint, e.g. `file.ls`. */
  readonly endpoint: string;
  /** True when no complete answer was received (connect error, cut connection, timeout). */
  readonly transport: boolean;
  /** The transport failure's code (`ECONNREFUSED`, `UND_ERR_SOCKET`, `ETIMEDOUT`…), when `transport`. */
  readonly transportCode?: string;

  constructor(args: { status: number; code: number; message: string; endpoint: string; transport?: boolean; transportCode?: string; cause?: unknown }) {
    super(`${args.endpoint}: ${args.status ? `HTTP ${args.status}` : 'no response'}${args.code ? ` error_code ${args.code}` : ''}: ${args.message}`, { cause: args.cause });
    this.name = 'ServiceError';
    this.status = args.status;
    this.code = args.code;
    this.serviceMessage = args.message;
    this.endpoint = args.endpoint;
    this.transport = args.transport ?? false;
    this.transportCode = args.transportCode;
  }
}

/**
 * Replaces every occurrence of a secret value (secret, token, signature; also URL-encoded) in `text`.
 * Used on every message a ServiceError carries, so that neither a service's echo nor a transport
 * error's text can leak one.
 */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length < 4) continue;
    for (const form of new Set([secret, encodeURIComponent(secret)])) out = out.split(form).join('[redacted]');
  }
  return out;
}

/** The `code` of a transport error (undici, Node), following its causes; undefined when none. */
export function transportCodeOf(err: unknown): string | undefined {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string' && e.code !== '') return e.code;
  }
  return undefined;
}

/** The service's error codes (one table, shared with the embedded service). */
export { ErrorCode } from '../shared/error-codes.js';
