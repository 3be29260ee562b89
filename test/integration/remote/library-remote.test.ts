import { LibraryRemote } from '../../../src/remote/library-remote.js';
import { serviceAvailable, startTestService } from '../../support/vfs.js';
import { remoteContract } from '../../unit/vfs/remote-contract.js';

remoteContract('LibraryRemote over the embedded service', await serviceAvailable(), async () => {
  const svc = await startTestService();
  const library = svc.client.credentials.library!;
  const refused = svc.client.withCredentials({ library: { org_client_id: library.org_client_id, org_client_secret: 'not-the-library-secret' } });
  return { remote: new LibraryRemote({ client: svc.client }), refused: new LibraryRemote({ client: refused }), close: () => svc.close() };
});
