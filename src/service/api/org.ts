/**
 * The library management API (`/m-open/1/org/*`), enterprise credential: create, info, ls, bind, unbind.
 */
import type { LibraryListItem } from '../../shared/records.js';
import type { EnterpriseRow, LibraryRow } from '../domain/directory.js';
import { FaultCode, ServiceFault, badParam } from '../domain/fault.js';
import type { RequestContext, Router } from '../http/router.js';
import type { ServiceParts } from './context.js';

export function registerOrgApi(router: Router, parts: ServiceParts): void {
  const { directory } = parts;
  const enterpriseOf = (ctx: RequestContext): EnterpriseRow => {
    if (!ctx.caller.enterprise) throw new ServiceFault(FaultCode.NoPermission, 'this call needs the enterprise client_id');
    return ctx.caller.enterprise;
  };
  /** The enterprise's library named by one of org_id / mount_id / out_id. */
  const libraryOf = (ctx: RequestContext, ent: EnterpriseRow): LibraryRow => {
    const p = ctx.params;
    for (const field of ['org_id', 'mount_id', 'out_id'] as const) {
      const v = p.str(field);
      if (v === undefined || v === '') continue;
      if (field !== 'out_id' && !/^\d+$/.test(v)) throw badParam(field, 'an integer id', v);
      const lib = directory.libraryBy(field === 'org_id' ? 'id' : field, field === 'out_id' ? v : Number(v), ent.id);
      if (!lib) throw new ServiceFault(FaultCode.LibraryMissing, `library ${field}=${v} not found or deleted`);
      return lib;
    }
    throw badParam('org_id', 'one of org_id, mount_id, out_id', null);
  };

  router.register('org', 'create', (ctx) => {
    const ent = enterpriseOf(ctx);
    const p = ctx.params;
    const lib = directory.createLibrary(ent.id, {
      name: p.required('org_name'), capacity: p.int('org_capacity', -1, { min: -1 }), logoUrl: p.str('org_logo'), outId: p.str('out_id') || undefined,
    });
    return { org_id: lib.id, mount_id: lib.mount_id };
  });

  router.register('org', 'info', (ctx) => {
    const lib = libraryOf(ctx, enterpriseOf(ctx));
    return {
      info: {
        org_id: lib.id, org_name: lib.name, org_logo_url: lib.logo_url, size_org_total: lib.capacity, size_org_use: lib.size_used,
        file_count: lib.file_count, dir_count: lib.dir_count, mount_id: lib.mount_id, owner_id: lib.owner_id,
      },
    };
  });

  router.register('org', 'ls', (ctx) => {
    const ent = enterpriseOf(ctx);
    const type = ctx.params.int('type', 0, { min: 0, max: 2 });
    const memberId = ctx.params.int('member_id', 0, { min: 0 });
    return { list: directory.librariesOf(ent.id, { type, memberId: memberId || undefined }).map(listItem) };
  });

  router.register('org', 'bind', (ctx) => {
    const ent = enterpriseOf(ctx);
    const lib = libraryOf(ctx, ent);
    const auth = directory.bind(ent.client_id, lib.id, ctx.params.required('title'));
    return { org_client_id: auth.org_client_id, org_client_secret: auth.org_client_secret };
  });

  router.register('org', 'unbind', (ctx) => {
    const ent = enterpriseOf(ctx);
    const id = ctx.params.required('org_client_id');
    if (!directory.unbind(ent.client_id, id)) throw new ServiceFault(FaultCode.ClientNotFound, 'org_client_id not found for this enterprise');
  });
}

export function listItem(lib: LibraryRow): LibraryListItem {
  return {
    org_id: lib.id, org_name: lib.name, org_logo_url: lib.logo_url, size_org_total: lib.capacity, size_org_use: lib.size_used,
    mount_id: lib.mount_id, owner_id: lib.owner_id,
  };
}
