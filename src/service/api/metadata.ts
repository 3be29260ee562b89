/**
 * Metadata of the library file API: `set_metadata` and `del_metadata` with a template linked to the
 * library (MetadataTemplates; templates are defined with `cloudlib service metadata`).
 */
import type { MetadataTemplates } from '../domain/metadata.js';
import type { RequestContext, Router } from '../http/router.js';
import { libraryOf, type ServiceParts } from './context.js';
import { parseJsonObject } from './request-params.js';

export function registerMetadataApi(router: Router, parts: ServiceParts, templates: MetadataTemplates): void {
  const { tree } = parts;
  const target = async (ctx: RequestContext, libId: number) => {
    const hash = ctx.params.str('hash');
    return hash ? tree.resolve(libId, { hash }) : tree.resolve(libId, { fullpath: ctx.params.path('fullpath') });
  };

  router.register('file', 'set_metadata', async (ctx) => {
    const lib = libraryOf(ctx);
    const p = ctx.params;
    const template = await templates.linked(lib.id, lib.ent_id, p.required('key'));
    const row = await target(ctx, lib.id);
    const metadata = parseJsonObject(p.required('metadata'), 'metadata');
    const display = (p.str('display') ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
    await tree.tx(async () => {
      await templates.set(row.id, template, metadata, display);
      await tree.db.run('UPDATE entries SET op_ms = ? WHERE id = ?', [await tree.opClock.next(lib.id), row.id]);
    });
  });

  router.register('file', 'del_metadata', async (ctx) => {
    const lib = libraryOf(ctx);
    const key = ctx.params.required('key');
    await templates.linked(lib.id, lib.ent_id, key);
    const row = await target(ctx, lib.id);
    await tree.tx(async () => {
      if (await templates.remove(row.id, key)) await tree.db.run('UPDATE entries SET op_ms = ? WHERE id = ?', [await tree.opClock.next(lib.id), row.id]);
    });
  });
}
