/**
 * Enterprise members (/m-open/1/ent/, enterprise credential): add_member, set_member, get_members.
 * Accounts are e-mail addresses, unique across the service; enabling an account beyond the enterprise's
 * account limit forces it to disabled (state 0), as the spec says. `group_path` names an existing
 * department; `create_personal_org=1` creates the member's personal library.
 */
import { Departments } from '../domain/departments.js';
import { EnterpriseLibraries } from '../domain/enterprise-libraries.js';
import { EnterpriseLog, EntLogType } from '../domain/enterprise-log.js';
import { FaultCode, ServiceFault, badParam } from '../domain/fault.js';
import { EnterpriseMembers } from '../domain/members.js';
import { md5Hex } from '../domain/tokens.js';
import type { RequestContext, Router } from '../http/router.js';
import type { ServiceParts } from './context.js';

export const EMAIL_RE = /^[^\s@/]+@[^\s@/]+\.[^\s@/]+$/;

export function registerEntMembers(router: Router, parts: ServiceParts): void {
  const db = parts.tree.db;
  const departments = new Departments(db, parts.clock);
  const libraries = new EnterpriseLibraries(db, parts.directory);
  const members = new EnterpriseMembers(db, parts.clock);
  const entLog = new EnterpriseLog(db, parts.clock);
  const entOf = async (ctx: RequestContext) => {
    if (!ctx.caller.enterprise) throw new ServiceFault(FaultCode.NoPermission, 'this call needs the enterprise client_id');
    await members.expireDue();
    return ctx.caller.enterprise;
  };

  router.register('ent', 'add_member', async (ctx) => {
    const ent = await entOf(ctx);
    const p = ctx.params;
    const account = p.required('account').trim();
    if (!EMAIL_RE.test(account)) throw badParam('account', 'an e-mail address', account);
    const state = p.int('state', 1, { min: 0, max: 1 });
    const groupPath = p.str('group_path') ?? '';
    const groupId = groupPath.trim() === '' ? 0 : (await departments.requirePath(ent.id, groupPath)).id;
    const personal = p.int('create_personal_org', 0, { min: 0, max: 1 }) === 1;
    if (await db.get('SELECT 1 FROM members WHERE account = ?', [account])) throw new ServiceFault(FaultCode.NameExists, `account ${JSON.stringify(account)} exists`);
    const password = p.str('password');
    return db.tx(async () => {
      const granted = await members.allowedState(ent.id, state);
      const id = await db.insert('INSERT INTO members (ent_id, account, name, email, phone, title, state, password_md5, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)', [ent.id, account, p.str('member_name') || account.split('@')[0]!, account, p.str('member_phone') ?? '', p.str('member_title') ?? '', granted, password ? md5Hex(password) : null, parts.clock()]);
      await departments.addMembers(groupId, [id]);
      if (personal) await libraries.ensurePersonal((await members.byId(ent.id, id))!);
      await entLog.record(ent.id, EntLogType.Member, `member ${account} added`, ctx.ip);
      return { member_id: id, state: granted };
    });
  });

  router.register('ent', 'set_member', async (ctx) => {
    const ent = await entOf(ctx);
    const p = ctx.params;
    const row = await members.require(ent.id, 'account', p.required('account').trim());
    const wanted = p.str('state') === undefined || p.str('state') === '' ? row.state : p.int('state', row.state, { min: 0, max: 1 });
    const password = p.str('password');
    return db.tx(async () => {
      const state = await members.allowedState(ent.id, wanted, row.id);
      await db.run('UPDATE members SET name = ?, phone = ?, title = ?, password_md5 = COALESCE(?, password_md5) WHERE id = ?', [p.str('member_name') || row.name, p.str('member_phone') ?? row.phone, p.str('member_title') ?? row.title, password ? md5Hex(password) : null, row.id]);
      await members.setState(row.id, state);
      await entLog.record(ent.id, EntLogType.Member, `member ${row.account} changed`, ctx.ip);
      return { member_id: row.id, state };
    });
  });

  router.register('ent', 'get_members', async (ctx) => {
    const ent = await entOf(ctx);
    const { start, size } = ctx.params.page(20);
    const page = await members.page(ent.id, start, size, 'listed = 1');
    return { list: page.list.map((m) => members.record(m)), count: page.count };
  });
}
