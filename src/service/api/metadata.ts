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
  const target = (ctx: RequestContext, libId: number) => {
    const hash = ctx.params.str('hash');
    return hash ? tree.resolve(libId, { hash }) : tree.resolve(libId, { fullpath: ctx.params.path('fullpath') });
  };

  router.register('file', 'set_metadata', (ctx) => {
    const lib = libraryOf(ctx);
    const p = ctx.params;
    const template = templates.linked(lib.id, lib.ent_id, p.required('key'));
    const row = target(ctx, lib.id);
    const metadata = parseJsonObject(p.required('metadata'), 'metadata');
    const display = (p.str('display') ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
    tree.tx(() => {
      templates.set(row.id, template, metadata, display);
      tree.db.prepare('UPDATE entries SET op_ms = ? WHERE id = ?').run(tree.opClock.next(lib.id), row.id);
    });
  });

  router.register('file', 'del_metadata', (ctx) => {
    const lib = libraryOf(ctx);
    const key = ctx.params.required('key');
    templates.linked(lib.id, lib.ent_id, key);
    const row = target(ctx, lib.id);
    tree.tx(() => {
      if (templates.remove(row.id, key)) tree.db.prepare('UPDATE entries SET op_ms = ? WHERE id = ?').run(tree.opClock.next(lib.id), row.id);
    });
  });
}
