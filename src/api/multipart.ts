/**
 * The multipart/form-data envelope of a call that carries a file: the fields, then one file part. Built
 * as two buffers around the content so that a small file goes out as one buffer in one write (undici's
 * FormData streams each part as a write of its own), and a large one streams between them.
 */
import { randomBytes } from 'node:crypto';

export interface FormEnvelope {
  contentType: string;
  /** Every field, then the file part's headers. */
  head: Buffer;
  /** The end of the file part and of the form. */
  tail: Buffer;
}

export function formEnvelope(fields: Iterable<[string, string]>, file: { field: string; filename: string }): FormEnvelope {
  const boundary = `----cloudlib${randomBytes(12).toString('hex')}`;
  let head = '';
  for (const [k, v] of fields) head += `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`;
  head += `--${boundary}\r\nContent-Disposition: form-data; name="${file.field}"; filename="${asciiFilename(file.filename)}"\r\n`
    + 'Content-Type: application/octet-stream\r\n\r\n';
  return { contentType: `multipart/form-data; boundary=${boundary}`, head: Buffer.from(head, 'utf8'), tail: Buffer.from(`\r\n--${boundary}--\r\n`, 'utf8') };
}

/** A file name a form part header can carry: printable ASCII without quotes or backslashes. */
function asciiFilename(name: string): string {
  return name.replace(/[^\x20-\x7e]|["\\]/g, '_');
}
