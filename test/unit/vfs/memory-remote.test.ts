import { MemoryRemote } from '../../../src/vfs/memory-remote.js';
import { remoteContract } from './remote-contract.js';

remoteContract('MemoryRemote', true, async () => ({ remote: new MemoryRemote(), close: async () => {} }));
