/**
 * JSON-RPC 2.0 over newline-delimited messages: framing, error codes, and the shapes of requests,
 * responses and notifications.
 */

export const RpcErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  Internal: -32603,
  /** The service answered an error: `data` carries status, error_code, error_msg, endpoint. */
  ServiceError: -32000,
  /** A gateway operation failed (Vfs error): `data.code` is the errno-like code. */
  GatewayError: -32001,
  /** The message exceeded the size limit. */
  TooLarge: -32002,
} as const;

export interface RpcRequest { jsonrpc: '2.0'; id?: string | number | null; method: string; params?: Record<string, unknown> | unknown[] }
export interface RpcError { code: number; message: string; data?: unknown }
export interface RpcResponse { jsonrpc: '2.0'; id: string | number | null; result?: unknown; error?: RpcError }
export interface RpcNotification { jsonrpc: '2.0'; method: string; params?: unknown }

/** Largest message accepted, in bytes (1 MiB). */
export const MAX_MESSAGE_BYTES = 1024 * 1024;

export class RpcFailure extends Error {
  constructor(readonly code: number, message: string, readonly data?: unknown) {
    super(message);
    this.name = 'RpcFailure';
  }
}

/**
 * Splits a byte stream into lines, refusing any line longer than `max` bytes (the rest of that line is
 * discarded and `onTooLarge` is called once for it).
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private size = 0;
  private discarding = false;

  constructor(
    private readonly onLine: (line: string) => void,
    private readonly onTooLarge: () => void,
    private readonly max = MAX_MESSAGE_BYTES,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(10, start);
      const end = nl === -1 ? chunk.length : nl;
      if (!this.discarding) {
        const piece = chunk.subarray(start, end);
        if (this.size + piece.length > this.max) {
          this.discarding = true;
          this.parts = [];
          this.size = 0;
          this.onTooLarge();
        } else if (piece.length) {
          this.parts.push(piece);
          this.size += piece.length;
        }
      }
      if (nl === -1) return;
      if (!this.discarding) {
        const line = Buffer.concat(this.parts).toString('utf8');
        this.parts = [];
        this.size = 0;
        if (line.trim() !== '') this.onLine(line);
      }
      this.discarding = false;
      start = nl + 1;
    }
  }
}
