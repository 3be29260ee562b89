/** Replaces a small file atomically and durably: write a sibling temp file, fsync it, rename it over. */
import { randomBytes } from 'node:crypto';
import { open, rename } from 'node:fs/promises';

export async function writeFileDurably(path: string, data: string): Promise<void> {
  const tmp = `${path}.${randomBytes(4).toString('hex')}.tmp`;
  const fh = await open(tmp, 'w');
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, path);
}
