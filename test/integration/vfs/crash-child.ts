/**
 * Child process of the crash test: opens a Vfs on the given service and data folder, with every upload
 * held back, writes one file, and prints ACK once close() has returned (the data is acknowledged). Then
 * it waits to be killed.
 */
import { ServiceClient, type Credentials } from '../../../src/api/client.js';
import { type FaultyRemote } from '../../../src/vfs/index.js';
import { createServiceVfs } from '../../../src/remote/service-vfs.js';

const args = JSON.parse(process.argv[2]) as { baseUrl: string; credentials: Credentials; dataDir: string; path: string; content: string };
const client = new ServiceClient({ baseUrl: args.baseUrl, credentials: args.credentials });
const vfs = await createServiceVfs({ libraries: [{ name: 'Library', client }], dataDir: args.dataDir, feedIntervalMs: 0, faults: true });
(vfs.remoteOf('Library') as FaultyRemote).inject({ kind: 'delay', methods: ['commit'], delayMs: 600_000 });
const h = await vfs.open(args.path, { write: true, create: true });
const data = Buffer.from(args.content);
for (let at = 0; at < data.length; at += 4096) await h.write(at, data.subarray(at, at + 4096));
await h.release();
process.stdout.write('ACK\n');
setInterval(() => undefined, 1000);
