/**
 * The user file API (`/m-api/*`, access token + sign) and its token endpoint (`/m-api/oauth2/token2`,
 * application client_id + sign). Every call acts as the token's member and is checked against the
 * member's permissions (FolderPermissions through MemberAccess): a refusal is 403/40310, a library the
 * member takes no part in 403/40311. File changes go through the same FileTree as the library file API.
 */
import type { TokenGrant, UserFileRecord, UserLibraryItem } from '../../shared/records.js';
import type { LibraryRow, MemberRow } from '../domain/directory.js';
import { seconds, type EntryRow, type Operator } from '../domain/entries.js';
import { FaultCode, ServiceFault, badParam } from '../domain/fault.js';
import { DEFAULT_FAVORITES, Favorites } from '../domain/favorites.js';
import { accountRefusal } from '../domain/members.js';
import { mayCreateLibraries } from '../domain/partner.js';
import { MemberAccess } from '../domain/permissions-access.js';
import { MemberListing, page } from '../domain/permissions-listing.js';
import type { FolderPermissions } from '../domain/permissions.js';
import { baseOf, joinPath, nameProblem, parentOf } from '../domain/paths.js';
import { OAuthFault, type AccessTokens } from '../domain/tokens.js';
import { Act } from '../domain/file-tree.js';
import { previewUrlResult } from '../preview/index.js';
import type { HandlerOf, RequestContext, Router } from '../http/router.js';
import type { EndpointName } from '../../shared/endpoints.js';
import type { ServiceParts } from './context.js';
import { filterInOrder, mapInOrder } from '../domain/in-order.js';

const SHA1_RE = /^[0-9a-f]{40}$/;

export interface UserApiParts { tokens: AccessTokens; permissions: FolderPermissions }

export function registerUserApi(router: Router, parts: ServiceParts, extra: UserApiParts): void {
  const { directory, tree, uploads, copies, downloads, queries } = parts;
  const { tokens, permissions } = extra;
  const favorites = new Favorites(tree.db, parts.clock);
  const listing = new MemberListing(tree);

  const memberOf = (ctx: RequestContext): MemberRow => {
    const m = ctx.caller.member;
    if (!m) throw new ServiceFault(FaultCode.TokenInvalid, 'this call needs a user access token');
    const refusal = accountRefusal(m, parts.clock());
    if (refusal) throw new ServiceFault(FaultCode.NoPermission, refusal);
    return m;
  };
  const opOf = (m: MemberRow): Operator => ({ id: m.id, name: m.name, account: m.account });
  const libraryByMount = async (mountId: number): Promise<LibraryRow> => {
    const lib = await tree.db.get('SELECT * FROM libraries WHERE mount_id = ? AND deleted = 0', [mountId]) as LibraryRow | undefined;
    if (!lib) throw new ServiceFault(FaultCode.LibraryMissing, `library mount_id=${mountId} not found or deleted`);
    return lib;
  };
  /** The library of `mount_id` and the member's access to it. */
  const scope = async (ctx: RequestContext, param = 'mount_id') => {
    const member = memberOf(ctx);
    const lib = await libraryByMount(ctx.params.int(param, 0, { min: 1 }));
    return { member, lib, op: opOf(member), access: await MemberAccess.open(permissions, tree, lib.id, member.id) };
  };
  const target = async (ctx: RequestContext, libId: number): Promise<EntryRow> => {
    const hash = ctx.params.str('hash');
    if (hash) return tree.resolve(libId, { hash });
    return tree.resolve(libId, { fullpath: ctx.params.path('fullpath') });
  };
  const record = (row: EntryRow, mountId: number): UserFileRecord => ({
    hash: row.hash, mount_id: mountId, dir: row.dir, fullpath: row.fullpath, filename: row.name,
    filehash: row.dir ? '' : row.filehash, filesize: row.dir ? 0 : row.filesize,
    create_member_id: String(row.create_member_id), create_member_name: row.create_member_name, create_dateline: seconds(row.create_ms),
    last_member_id: String(row.last_member_id), last_member_name: row.last_member_name, last_dateline: seconds(row.last_ms),
  });
  /**
   * Preview page (a path: the spec's "prefix the service host") and image thumbnail (a URL) of a file the
   * member may preview; empty otherwise. Valid 10 minutes, like preview_url.
   */
  const previewLinks = async (row: EntryRow, access: MemberAccess): Promise<{ preview: string; thumbnail: string }> => {
    if (row.dir || !await access.can(row.parent_id ?? 0, 'pv')) return { preview: '', thumbnail: '' };
    const links = parts.previews.issue({
      libraryId: row.library_id, fullpath: row.fullpath, filehash: row.filehash, filename: row.name, filesize: row.filesize, thumbnail: true, baseUrl: parts.baseUrl,
    });
    return { preview: new URL(links.url).pathname, thumbnail: links.thumbnail ?? '' };
  };
  const withLock = async (row: EntryRow, mountId: number, access: MemberAccess) =>
    ({ ...record(row, mountId), thumbnail: (await previewLinks(row, access)).thumbnail, lock: row.lock_member_name !== null ? 1 : 0 });
  const on = <N extends EndpointName<'user'>>(name: N, handler: HandlerOf<'user', N>) => router.register('user', name, handler);

  // ---- token ------------------------------------------------------------------------------------

  on('token', async (ctx) => tokenGrant(ctx, tokens));

  // ---- libraries --------------------------------------------------------------------------------

  on('mount', async (ctx) => {
    const member = memberOf(ctx);
    const libs = await filterInOrder(await tree.db.all<LibraryRow>('SELECT * FROM libraries WHERE deleted = 0 AND ent_id = ? ORDER BY id', [member.ent_id]),
      async (lib) => permissions.takesPart(lib.id, member.id));
    const list: UserLibraryItem[] = await mapInOrder(libs, async (lib) => ({
      ent_id: lib.ent_id, org_id: lib.id, org_name: lib.name, mount_id: lib.mount_id, org_type: lib.type,
      member_count: Number((await tree.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM library_members WHERE library_id = ?', [lib.id]))!.n), owner_member_id: lib.owner_id, org_logo_url: lib.logo_url,
      size_org_total: lib.capacity, size_org_use: lib.size_used, storage_point: 'local', storage_ethernet: 1,
    }));
    return { list };
  });

  on('library_create', async (ctx) => {
    const member = memberOf(ctx);
    const p = ctx.params;
    const entId = p.int('ent_id', member.ent_id, { min: 0 });
    if (entId !== member.ent_id) throw new ServiceFault(FaultCode.NoPermission, `a member creates libraries in their own enterprise (${member.ent_id}), got ent_id ${entId}`);
    if (!await mayCreateLibraries(tree.db, member.id)) throw new ServiceFault(FaultCode.NoPermission, 'no permission to create libraries: this enterprise reserves it to its administrators');
    const storage = p.str('storage_point');
    if (storage !== undefined && storage !== '' && storage !== 'local') throw badParam('storage_point', "'local' (the only storage point)", storage);
    const lib = await tree.tx(async () => {
      const created = await directory.createLibrary(entId, { name: p.required('name'), capacity: p.int('capacity', -1, { min: -1 }), ownerId: member.id });
      await tree.db.run('INSERT INTO library_members (library_id, member_id, role_id) VALUES (?, ?, 1)', [created.id, member.id]);
      return created;
    });
    return { org_id: lib.id, mount_id: lib.mount_id, storage_point: 'local' };
  });

  // ---- reading ----------------------------------------------------------------------------------

  on('ls', async (ctx) => {
    const { lib, access } = await scope(ctx);
    const p = ctx.params;
    const pg = p.page(100);
    const order = p.str('order') || undefined;
    const sort = p.str('sort');
    let rows: EntryRow[];
    if (sort !== undefined && sort !== '') {
      rows = await listing.byKind(access, p.int('sort', 0), order);
    } else {
      const folder = p.path('fullpath', { allowRoot: true });
      const folderId = await tree.folderId(lib.id, folder) ?? 0;
      await access.requireIn(folderId, 'cd', 'open this folder');
      rows = await listing.children(access, folderId, { dirsOnly: p.flag('dir'), order });
    }
    const out = page(rows, pg);
    return { count: out.count, list: await mapInOrder(out.list, async (r) => withLock(r, lib.mount_id, access)) };
  });

  on('open', async (ctx) => {
    const { lib, op, access } = await scope(ctx);
    const row = await target(ctx, lib.id);
    if (row.dir) throw new ServiceFault(FaultCode.NotAFolder, `${JSON.stringify(row.fullpath)} is a folder; only files are opened`);
    await access.requireOn(row, 'dl', 'download this file');
    await tree.event(row, Act.Download, op);
    return {
      hash: row.hash, filehash: row.filehash, filesize: row.filesize, lock: row.lock_member_name !== null ? 1 : 0,
      uris: [downloads.url({ sha1: row.filehash, size: row.filesize, filename: row.name, modifiedMs: row.last_ms, libraryId: row.library_id })],
    };
  });

  on('preview_url', async (ctx) => {
    const { lib, access } = await scope(ctx);
    const row = await target(ctx, lib.id);
    if (row.dir) throw new ServiceFault(FaultCode.NotAFolder, `${JSON.stringify(row.fullpath)} is a folder; only files have previews`);
    await access.requireOn(row, 'pv', 'preview this file');
    return previewUrlResult(parts.previews, { libraryId: lib.id, fullpath: row.fullpath, filename: row.name, filehash: row.filehash, filesize: row.filesize, dir: false },
      { watermark: ctx.params.str('watermark'), member_name: memberOf(ctx).name }, parts.baseUrl);
  });

  on('info', async (ctx) => {
    const { lib, access } = await scope(ctx);
    const row = await target(ctx, lib.id);
    if (!await access.mayDisplay(row)) await access.requireOn(row, 'ls', 'see this item', 'ss');
    const info: UserFileRecord = { ...record(row, lib.mount_id), lock: row.lock_member_name !== null ? 1 : 0 };
    if (!row.dir) Object.assign(info, await previewLinks(row, access));
    return info;
  });

  on('attribute', async (ctx) => {
    const { lib, access } = await scope(ctx);
    const row = await target(ctx, lib.id);
    if (!await access.mayDisplay(row)) await access.requireOn(row, 'ls', 'see this item', 'ss');
    const totals = await queries.folderTotals(row);
    return { file_count: totals.file_count, folder_count: totals.folder_count };
  });

  on('search', async (ctx) => {
    const member = memberOf(ctx);
    const p = ctx.params;
    const keyword = p.required('keyword');
    const scopeSet = parseJsonList(p.str('scope'), 'scope', ['filename', 'tag']);
    for (const s of scopeSet) if (!['filename', 'tag', 'content'].includes(s)) throw badParam('scope', 'a JSON array of "filename", "tag", "content"', p.str('scope'));
    if (scopeSet.includes('content')) throw new ServiceFault(FaultCode.FeatureNotEnabled, 'full-text search (scope content) is not enabled on this service');
    const extList = parseJsonList(p.str('ext'), 'ext', []).map((e) => e.toLowerCase().replace(/^\./, ''));
    const ext = { dirs: extList.includes('dir'), files: extList.includes('file'), extensions: new Set(extList.filter((e) => e !== 'dir' && e !== 'file')) };
    const mountId = p.int('mount_id', 0, { min: 0 });
    const folder = p.path('fullpath', { allowRoot: true });
    if (mountId === 0 && folder !== '') throw badParam('fullpath', 'empty when searching all libraries (mount_id 0)', folder);
    const libs = mountId === 0
      ? await filterInOrder((await tree.db.all('SELECT * FROM libraries WHERE deleted = 0 AND ent_id = ? ORDER BY id', [member.ent_id]) as LibraryRow[]), async (l) => permissions.takesPart(l.id, member.id))
      : [await libraryByMount(mountId)];
    const sc = { filename: scopeSet.includes('filename'), tag: scopeSet.includes('tag') };
    const found: UserFileRecord[] = [];
    for (const lib of libs) {
      const access = await MemberAccess.open(permissions, tree, lib.id, member.id);
      for (const r of await listing.search(access, keyword, folder, sc, ext)) found.push(record(r, lib.mount_id));
    }
    return page(found, p.page(100));
  });

  // ---- changes ----------------------------------------------------------------------------------

  on('create_folder', async (ctx) => {
    const { lib, op, access } = await scope(ctx);
    const p = ctx.params;
    const fullpath = p.path('fullpath');
    const overwrite = p.int('overwrite', 1, { min: 0, max: 1 }) === 1;
    await access.requireIn(await access.nearestFolder(fullpath), 'mk', 'create a folder here');
    const existing = await tree.byPath(lib.id, fullpath);
    if (existing && overwrite) {
      if (!existing.dir) throw new ServiceFault(FaultCode.NameExists, `${JSON.stringify(fullpath)} is a file`);
      return { hash: existing.hash, fullpath: existing.fullpath };
    }
    const row = await tree.tx(async () => {
      const folder = parentOf(fullpath);
      const name = existing ? await tree.freeName(lib.id, folder, baseOf(fullpath), true) : baseOf(fullpath);
      return tree.createFolder(lib.id, joinPath(folder, name), op);
    });
    return { hash: row.hash, fullpath: row.fullpath };
  });

  on('create_file', async (ctx) => {
    const { lib, op, access } = await scope(ctx);
    const p = ctx.params;
    const fullpath = p.path('fullpath');
    const filehash = p.required('filehash');
    if (!SHA1_RE.test(filehash)) throw badParam('filehash', 'SHA-1 as 40 lowercase hex characters', filehash);
    const filesize = p.int('filesize', -1, { min: 0 });
    if (filesize < 0) throw badParam('filesize', 'a size in bytes', p.str('filesize') ?? null);
    const overwrite = p.int('overwrite', 0, { min: 0, max: 1 }) === 1;
    const existing = await tree.byPath(lib.id, fullpath);
    if (existing && !existing.dir && overwrite) await access.requireOn(existing, 'w', 'change this file');
    else await access.requireIn(await access.nearestFolder(fullpath), 'ul', 'add a file here');
    return uploads.create(lib.id, fullpath, filehash, filesize, overwrite, op, parts.uploadServerUrl);
  });

  on('upload_server', async (ctx) => {
    await scope(ctx);
    return { server: parts.uploadServerUrl };
  });

  on('copy', async (ctx) => {
    const { lib, op, access } = await scope(ctx);
    const p = ctx.params;
    const sources = sourcePaths(ctx);
    const targetMount = p.int('target_mount_id', 0, { min: 0 });
    const dest = targetMount === 0 || targetMount === lib.mount_id ? { lib, access } : await (async () => {
      const l = await libraryByMount(targetMount);
      return { lib: l, access: await MemberAccess.open(permissions, tree, l.id, access.memberId) };
    })();
    const folder = p.path('target_fullpath', { allowRoot: true });
    const folderId = await tree.folderId(dest.lib.id, folder) ?? 0;
    const overwrite = p.flag('overwrite');
    const deleteFrom = p.flag('delete_from');
    const rows = await mapInOrder(sources, async (s) => tree.require(lib.id, s));
    for (const row of rows) {
      if (row.dir) await access.requireIn(row.id, 'cd', 'copy this folder');
      else await access.requireOn(row, 'dl', 'copy this file');
      await dest.access.requireIn(folderId, row.dir ? 'mk' : 'ul', row.dir ? 'create a folder here' : 'add a file here');
      if (deleteFrom) await access.requireOn(row, 'rm', 'delete this item', 'srm');
    }
    for (const row of rows) {
      const to = joinPath(folder, row.name);
      if (dest.lib.id === lib.id) await copies.copy(lib.id, row.fullpath, to, overwrite && !row.dir, op);
      else await copyAcross(row, dest.lib.id, to, overwrite && !row.dir, op);
      if (deleteFrom) await tree.remove(lib.id, row.fullpath, false, op);
    }
  });

  /** Copies an entry (and its subtree) into another library at once; contents are shared blobs. */
  const copyAcross = async (src: EntryRow, targetLib: number, to: string, overwrite: boolean, op: Operator): Promise<void> => {
    await tree.tx(async () => {
      if (!src.dir) {
        await tree.placeContent(targetLib, to, { sha1: src.filehash, size: src.filesize }, overwrite, op);
        return;
      }
      await tree.checkCapacity(targetLib, (await queries.folderTotals(src)).files_size);
      const folder = parentOf(to);
      const top = joinPath(folder, await tree.freeName(targetLib, folder, baseOf(to), true));
      await tree.ensureFolder(targetLib, top, op);
      for (const d of await tree.subtree(src)) {
        const path = top + d.fullpath.slice(src.fullpath.length);
        if (d.dir) await tree.ensureFolder(targetLib, path, op);
        else await tree.placeContent(targetLib, path, { sha1: d.filehash, size: d.filesize }, false, op);
      }
    });
  };

  on('move', async (ctx) => {
    const { lib, op, access } = await scope(ctx);
    const folder = ctx.params.path('target_fullpath', { allowRoot: true });
    const folderId = await tree.folderId(lib.id, folder) ?? 0;
    const rows = await mapInOrder(sourcePaths(ctx), async (s) => tree.require(lib.id, s));
    for (const row of rows) {
      await access.requireOn(row, 'rm', 'move this item away', 'srm');
      await access.requireIn(folderId, row.dir ? 'mk' : 'ul', row.dir ? 'create a folder here' : 'add a file here');
    }
    await tree.tx(async () => {
      for (const row of rows) await tree.move(lib.id, row.fullpath, joinPath(folder, row.name), op);
    });
  });

  on('rename', async (ctx) => {
    const { lib, op, access } = await scope(ctx);
    const row = await tree.require(lib.id, ctx.params.path('fullpath'));
    const newname = ctx.params.required('newname');
    const problem = nameProblem(newname);
    if (problem) throw badParam('newname', problem, newname);
    await access.requireOn(row, 'ren', 'rename this item', 'sren');
    await tree.move(lib.id, row.fullpath, joinPath(parentOf(row.fullpath), newname), op);
  });

  on('del', async (ctx) => {
    const { lib, op, access } = await scope(ctx);
    const row = await tree.require(lib.id, ctx.params.path('fullpath'));
    await access.requireOn(row, 'rm', 'delete this item', 'srm');
    await tree.remove(lib.id, row.fullpath, false, op);
    parts.content.scheduleCollect();
  });

  // ---- favorites --------------------------------------------------------------------------------

  const favId = (ctx: RequestContext) => ctx.params.int('fav_id', DEFAULT_FAVORITES, { min: -1 });
  on('favorites_add_file', async (ctx) => {
    const { lib, member, access } = await scope(ctx);
    const row = await tree.require(lib.id, ctx.params.path('fullpath'));
    if (!await access.mayDisplay(row)) await access.requireOn(row, 'ls', 'see this item', 'ss');
    await favorites.add(member.id, favId(ctx), row);
  });
  on('favorites_del_file', async (ctx) => {
    const { lib, member } = await scope(ctx);
    const row = await tree.require(lib.id, ctx.params.path('fullpath'));
    if (!await favorites.remove(member.id, favId(ctx), row)) throw new ServiceFault(FaultCode.FileMissing, `${JSON.stringify(row.fullpath)} is not in favorites ${favId(ctx)}`);
  });
  on('favorites_get_files', async (ctx) => {
    const member = memberOf(ctx);
    const accessByLib = new Map<number, MemberAccess | null>();
    const visible = await filterInOrder((await favorites.entries(member.id, favId(ctx))), async (row) => {
      if (!accessByLib.has(row.library_id)) {
        accessByLib.set(row.library_id, await directory.library(row.library_id) && await permissions.takesPart(row.library_id, member.id) ? new MemberAccess(permissions, tree, row.library_id, member.id) : null);
      }
      return await accessByLib.get(row.library_id)?.mayDisplay(row) ?? false;
    });
    const mounts = new Map<number, number>();
    const mountOf = async (libId: number) => {
      if (!mounts.has(libId)) mounts.set(libId, (await directory.library(libId))!.mount_id);
      return mounts.get(libId)!;
    };
    const { start, size } = ctx.params.page(100);
    return { list: await mapInOrder(visible.slice(start, start + size), async (r) => record(r, await mountOf(r.library_id))) };
  });
}

/** `fullpath` or `fullpaths` (`|`-separated). */
function sourcePaths(ctx: RequestContext): string[] {
  if (ctx.params.str('fullpaths')) return ctx.params.paths('fullpaths');
  return [ctx.params.path('fullpath')];
}

function parseJsonList(raw: string | undefined, name: string, fallback: string[]): string[] {
  if (raw === undefined || raw === '') return fallback;
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    v = undefined;
  }
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) throw badParam(name, 'a JSON array of strings', raw);
  return v as string[];
}

/**
 * The token endpoint's answer (`/m-api/oauth2/token2`, and `/m-api/oauth2/token` that the official SDKs
 * also call): password, refresh_token and exchange_token grants.
 */
export async function tokenGrant(ctx: RequestContext, tokens: AccessTokens): Promise<TokenGrant> {
  const app = ctx.caller.application;
  if (!app) throw new OAuthFault('invalid_client', 'client_id not found');
  const p = ctx.params;
  const grant = p.str('grant_type');
  if (grant === 'password') return tokens.grantPassword(app, p.str('username'), p.str('password'));
  if (grant === 'refresh_token') return tokens.grantRefresh(app, p.str('refresh_token'));
  if (grant === 'exchange_token') return tokens.grantExchange(app, p.str('token'));
  throw new OAuthFault('invalid_request', `parameter 'grant_type': expected 'password', 'refresh_token' or 'exchange_token', got ${JSON.stringify(grant ?? null)}`);
}
