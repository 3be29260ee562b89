/** SHA-1 of a file's first bytes, as a live Hash that later blocks continue (resuming after a restart). */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';

export async function sha1OfFilePrefix(path: string, length: number): Promise<Hash> {
  const hash = createHash('sha1');
  if (length === 0) return hash;
  for await (const chunk of createReadStream(path, { start: 0, end: length - 1, highWaterMark: 1 << 20 })) {
    hash.update(chunk as Buffer);
  }
  return hash;
}
