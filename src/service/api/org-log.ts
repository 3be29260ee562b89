/**
 * `org/log` (/m-open/1/org/log, enterprise credential): the file operations of the enterprise's
 * libraries (the events the history shows, plus share-link events 1014–1018), filtered by library, act
 * codes and time, ordered and paged as the spec says (page 100 by default, at most 1000).
 */
import { FaultCode, ServiceFault, badParam } from '../domain/fault.js';
import { ACT_NAMES } from '../domain/file-tree.js';
import type { Router } from '../http/router.js';
import type { ServiceParts } from './context.js';

interface LogRow {
  hash: string; dir: number; act: number; filehash: string; filesize: number; fullpath: string;
  member_id: number; ms: number; member_name: string; name: string | null; account: string | null;
}

export function registerOrgLog(router: Router, parts: ServiceParts): void {
  const { directory } = parts;
  router.register('org', 'log', async (ctx) => {
    const ent = ctx.caller.enterprise;
    if (!ent) throw new ServiceFault(FaultCode.NoPermission, 'this call needs the enterprise client_id');
    const p = ctx.params;
    const where: string[] = ['l.ent_id = ?'];
    const args: (string | number)[] = [ent.id];
    for (const field of ['org_id', 'mount_id'] as const) {
      const v = p.str(field);
      if (v === undefined || v === '') continue;
      if (!/^\d+$/.test(v)) throw badParam(field, 'an integer id', v);
      const lib = await directory.libraryBy(field === 'org_id' ? 'id' : 'mount_id', Number(v), ent.id);
      if (!lib) throw new ServiceFault(FaultCode.LibraryMissing, `library ${field}=${v} not found or deleted`);
      where.push('e.library_id = ?');
      args.push(lib.id);
    }
    const act = p.str('act');
    if (act !== undefined && act !== '') {
      const codes = act.split(',').map((c) => c.trim());
      if (codes.some((c) => !/^\d+$/.test(c))) throw badParam('act', 'comma-separated act codes', act);
      where.push(`e.act IN (${codes.map(() => '?').join(',')})`);
      args.push(...codes.map(Number));
    }
    const orderby = p.str('orderby') ?? '';
    if (!['', 'asc', 'desc'].includes(orderby)) throw badParam('orderby', "'asc' or 'desc'", orderby);
    const from = p.int('start_dateline', 0, { min: 0 });
    const until = p.int('end_dateline', 0, { min: 0 });
    if (from > 0) { where.push('e.ms >= ?'); args.push(from * 1000); }
    if (until > 0) { where.push('e.ms < ?'); args.push(until * 1000); }
    const start = p.int('start', 0, { min: 0 });
    const size = p.int('size', 100, { min: 1, max: 1000 });
    const db = parts.tree.db;
    const sqlWhere = where.join(' AND ');
    const total = (await db.get(`SELECT COUNT(*) AS n FROM file_events e JOIN libraries l ON l.id = e.library_id WHERE ${sqlWhere}`, [...args]) as { n: number }).n;
    const dir = orderby === 'asc' ? 'ASC' : 'DESC';
    const rows = await db.all(`SELECT e.hash, e.dir, e.act, e.filehash, e.filesize, e.fullpath, e.member_id, e.ms, e.member_name, m.name, m.account
      FROM file_events e JOIN libraries l ON l.id = e.library_id LEFT JOIN members m ON m.id = e.member_id
      WHERE ${sqlWhere} ORDER BY e.ms ${dir}, e.id ${dir} LIMIT ? OFFSET ?`, [...args, size, start]) as LogRow[];
    return {
      total,
      list: rows.map((r) => {
        const name = r.name ?? r.member_name;
        const account = r.account ?? '';
        return {
          hash: r.hash, dir: r.dir, act: r.act, filehash: r.filehash, filesize: r.filesize, fullpath: r.fullpath, member_id: r.member_id,
          dateline: Math.floor(r.ms / 1000), act_name: ACT_NAMES[r.act] ?? String(r.act),
          member_name: account ? `${name}(${account})` : name, display_name: name, member_account: account,
        };
      }),
    };
  });
}
