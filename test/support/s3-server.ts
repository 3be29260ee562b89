/**
 * startS3Server(): a real S3-compatible object store for tests — OpenStack Swift with s3api, started by
 * scripts/s3-server in a temporary folder (installed by scripts/bootstrap). `stop()` ends it and removes
 * the folder. The access key and secret are those of the script's tempauth user.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';

export interface S3Server {
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  stop(): Promise<void>;
}

const SCRIPT = fileURLToPath(new URL('../../scripts/s3-server', import.meta.url));

export async function startS3Server(readyTimeoutMs = 120_000): Promise<S3Server> {
  const dir = await mkdtemp(join(tmpdir(), 'cloudlib-s3-'));
  // Its own process group: stopping it reaches every server it started, even if the script is stuck.
  const child = spawn('bash', [SCRIPT, dir], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const signal = (sig: NodeJS.Signals): void => {
    try {
      process.kill(-child.pid!, sig);
    } catch {
      // already gone
    }
  };
  const orphaned = (): void => signal('SIGTERM');
  process.once('exit', orphaned);
  let errors = '';
  child.stderr.on('data', (d: Buffer) => { errors = (errors + d.toString()).slice(-4000); });
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      signal('SIGTERM');
      await exited;
    }
    process.off('exit', orphaned);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const endpoint = await new Promise<string>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`s3-server not ready within ${readyTimeoutMs} ms: ${errors}`)), readyTimeoutMs);
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /s3-server ready endpoint=(\S+)/.exec(out);
        if (m) { clearTimeout(timer); resolve(m[1]!); }
      });
      void exited.then((code) => { clearTimeout(timer); reject(new Error(`s3-server exited (${code}) before it was ready: ${errors}`)); });
    });
    return { endpoint, accessKeyId: 'test:tester', secretAccessKey: 'testing', stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Keys of `bucket` under `prefix`, read with a client of the test's own (not through the code under test). */
export async function listKeys(server: S3Server, bucket: string, prefix: string): Promise<string[]> {
  const client = new S3Client({
    region: 'us-east-1', endpoint: server.endpoint, forcePathStyle: true,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
  });
  try {
    const keys: string[] = [];
    let ContinuationToken: string | undefined;
    do {
      const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken }));
      for (const o of page.Contents ?? []) if (o.Key) keys.push(o.Key);
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken);
    return keys;
  } finally {
    client.destroy();
  }
}
