import { LibraryRemote } from '../../../src/remote/library-remote.js';
import { serviceAvailable, startTestService } from '../../support/vfs.js';
import { remoteContract } from '../../unit/vfs/remote-contract.js';

remoteContract('LibraryRemote over the embedded service', await serviceAvailable(), async () => {
  const svc = await startTestService();
  return { remote: new LibraryRemote({ client: svc.client }), close: () => svc.close() };
});
