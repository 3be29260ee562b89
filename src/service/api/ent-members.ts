/**
 * Enterprise members (/m-open/1/ent/, enterprise credential): add_member, set_member, get_members.
 * Accounts are e-mail addresses, unique across the service; enabling an account beyond the enterprise's
 * account limit forces it to disabled (state 0), as the spec says. Department paths (`group_path`) and
 * personal libraries (`create_personal_org=1`) answer 501 "not supported" until departments exist.
 */
import type { EntMember } from '../../shared/records.js';
import { FaultCode, ServiceFault, badParam } from '../domain/fault.js';
import { md5Hex } from '../domain/tokens.js';
import type { RequestContext, Router } from '../http/router.js';
import type { ServiceParts } from './context.js';

const EMAIL_RE = /^[^\s@/]+@[^\s@/]+\.[^\s@/]+$/;

interface MemberDbRow { id: number; out_id: string | null; account: string; name: string; email: string; phone: string; title: string; state: number }

function toRecord(r: MemberDbRow): EntMember {
  return { member_id: r.id, out_id: r.out_id ?? '', account: r.account, member_name: r.name, member_email: r.email, member_phone: r.phone, member_title: r.title, state: r.state };
}

export function registerEntMembers(router: Router, parts: ServiceParts): void {
  const db = parts.tree.db;
  const entOf = (ctx: RequestContext) => {
    if (!ctx.caller.enterprise) throw new ServiceFault(FaultCode.NoPermission, 'this call needs the enterprise client_id');
    return ctx.caller.enterprise;
  };
  /** State an account may have: 0 stays 0; 1 only while the enabled accounts stay within the limit. */
  const allowedState = (entId: number, wanted: number, exceptId?: number): number => {
    if (wanted !== 1) return 0;
    const limit = (db.prepare('SELECT member_limit FROM enterprises WHERE id = ?').get(entId) as { member_limit: number }).member_limit;
    const enabled = (db.prepare('SELECT COUNT(*) AS n FROM members WHERE ent_id = ? AND state = 1 AND id != ?').get(entId, exceptId ?? 0) as { n: number }).n;
    return enabled < limit ? 1 : 0;
  };
  const notYet = (ctx: RequestContext) => {
    if ((ctx.params.str('group_path') ?? '') !== '') throw new ServiceFault(FaultCode.NotSupported, 'group_path: departments are not supported by this service yet');
    if (ctx.params.int('create_personal_org', 0, { min: 0, max: 1 }) === 1) throw new ServiceFault(FaultCode.NotSupported, 'create_personal_org: personal libraries are not supported by this service yet');
  };

  router.register('ent', 'add_member', (ctx) => {
    const ent = entOf(ctx);
    const p = ctx.params;
    const account = p.required('account').trim();
    if (!EMAIL_RE.test(account)) throw badParam('account', 'an e-mail address', account);
    const state = p.int('state', 1, { min: 0, max: 1 });
    notYet(ctx);
    if (db.prepare('SELECT 1 FROM members WHERE account = ?').get(account)) throw new ServiceFault(FaultCode.NameExists, `account ${JSON.stringify(account)} exists`);
    const password = p.str('password');
    return db.transaction(() => {
      const granted = allowedState(ent.id, state);
      const id = Number(db.prepare('INSERT INTO members (ent_id, account, name, email, phone, title, state, password_md5, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)')
        .run(ent.id, account, p.str('member_name') || account.split('@')[0]!, account, p.str('member_phone') ?? '', p.str('member_title') ?? '', granted, password ? md5Hex(password) : null, parts.clock()).lastInsertRowid);
      return { member_id: id, state: granted };
    })();
  });

  router.register('ent', 'set_member', (ctx) => {
    const ent = entOf(ctx);
    const p = ctx.params;
    const account = p.required('account').trim();
    const row = db.prepare('SELECT * FROM members WHERE ent_id = ? AND account = ?').get(ent.id, account) as MemberDbRow | undefined;
    if (!row) throw new ServiceFault(FaultCode.MemberMissing, `no member ${JSON.stringify(account)} in this enterprise`);
    const wanted = p.str('state') === undefined || p.str('state') === '' ? row.state : p.int('state', row.state, { min: 0, max: 1 });
    const password = p.str('password');
    return db.transaction(() => {
      const state = allowedState(ent.id, wanted, row.id);
      db.prepare('UPDATE members SET name = ?, phone = ?, title = ?, state = ?, password_md5 = COALESCE(?, password_md5) WHERE id = ?')
        .run(p.str('member_name') || row.name, p.str('member_phone') ?? row.phone, p.str('member_title') ?? row.title, state, password ? md5Hex(password) : null, row.id);
      // A disabled account's tokens stop working at once.
      if (state === 0) db.prepare('DELETE FROM access_tokens WHERE member_id = ?').run(row.id);
      return { member_id: row.id, state };
    })();
  });

  router.register('ent', 'get_members', (ctx) => {
    const ent = entOf(ctx);
    const start = ctx.params.int('start', 0, { min: 0 });
    const size = ctx.params.int('size', 20, { min: 1, max: 1000 });
    const count = (db.prepare('SELECT COUNT(*) AS n FROM members WHERE ent_id = ?').get(ent.id) as { n: number }).n;
    const rows = db.prepare('SELECT * FROM members WHERE ent_id = ? ORDER BY id LIMIT ? OFFSET ?').all(ent.id, size, start) as MemberDbRow[];
    return { list: rows.map(toRecord), count };
  });
}
