/** JSON answers and the mapping of errors to `{error_code, error_msg}` bodies. */
import type { ServerResponse } from 'node:http';
import { ParamError } from '../../shared/endpoints.js';
import type { Logger } from '../../shared/log.js';
import { FaultCode } from '../domain/fault.js';

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** The status, code and message an error is answered with. Unknown errors are 500/50001 (and logged). */
export function faultOf(err: unknown, log: Logger, context: Record<string, unknown> = {}): { status: number; code: number; message: string; extra?: Record<string, unknown> } {
  if (err instanceof ParamError) return { status: 400, code: FaultCode.BadParam, message: err.message };
  const e = err as { status?: unknown; code?: unknown; message?: string; extra?: Record<string, unknown> };
  if (err instanceof Error && typeof e.status === 'number' && e.status >= 400 && e.status < 600 && typeof e.code === 'number') {
    return { status: e.status, code: e.code, message: err.message, extra: e.extra };
  }
  log.error({ err, ...context }, 'request failed');
  return { status: 500, code: FaultCode.Internal, message: 'internal error' };
}

export function sendFault(res: ServerResponse, err: unknown, log: Logger, context: Record<string, unknown> = {}): void {
  const f = faultOf(err, log, context);
  sendJson(res, f.status, { ...(f.extra ?? {}), error_code: f.code, error_msg: f.message });
}
