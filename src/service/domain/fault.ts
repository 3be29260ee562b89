/**
 * ServiceFault: a refusal of the service, carrying its `error_code` (spec/decisions.md; the first three
 * digits are the HTTP status). The domain throws these; the HTTP layer, the upload server and the link
 * pages answer them as `{error_code, error_msg}`. Messages never carry a secret.
 */
/** The service's error codes: the one table of src/shared/ (each of our own documented in docs/service-decisions.md). */
import { ErrorCode as FaultCode } from '../../shared/error-codes.js';

export { FaultCode };

export class ServiceFault extends Error {
  /** HTTP status: the first three digits of the code. */
  readonly status: number;

  constructor(readonly code: number, message: string) {
    super(message);
    this.name = 'ServiceFault';
    this.status = Number(String(code).slice(0, 3));
  }
}

export const badParam = (name: string, expected: string, got: unknown): ServiceFault =>
  new ServiceFault(FaultCode.BadParam, `parameter '${name}': expected ${expected}, got ${JSON.stringify(got)}`);

export const fileMissing = (what: string): ServiceFault =>
  new ServiceFault(FaultCode.FileMissing, `file or folder not found: ${JSON.stringify(what)}`);
