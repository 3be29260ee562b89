/**
 * The library file API (`/m-open/1/file/*`): each endpoint's parameters read and handed to the domain.
 */
import type { FileInfo } from '../../shared/records.js';
import { parseTags, tagsOf, ALL_PERMISSIONS, type EntryRow } from '../domain/entries.js';
import { FaultCode, ServiceFault, badParam } from '../domain/fault.js';
import { SHA1_RE } from '../store/blob-store.js';
import { normalizePath } from '../domain/paths.js';
import type { HandlerOf, RequestContext, Router } from '../http/router.js';
import type { EndpointName } from '../../shared/endpoints.js';
import type { ReceivedFile } from '../http/form-data.js';
import { libraryOf, operatorOf, type ServiceParts } from './context.js';
import { previewUrlResult } from '../preview/index.js';

const INFO_IGNORES = new Set(['tag', 'favorite', 'property', 'permission', 'lock', 'url', 'preview', 'thumbnail']);

export function registerFileApi(router: Router, parts: ServiceParts): void {
  const { directory, tree, queries, uploads, copies, downloads } = parts;
  const on = <N extends EndpointName<'file'>>(name: N, handler: (ctx: RequestContext, libraryId: number) => ReturnType<HandlerOf<'file', N>>) =>
    router.register('file', name, (ctx) => handler(ctx, libraryOf(ctx).id));
  const op = async (ctx: RequestContext) => operatorOf(ctx, directory);
  const target = async (ctx: RequestContext, libraryId: number): Promise<EntryRow> => {
    if (ctx.params.has('hash') && ctx.params.str('hash') !== '') return tree.resolve(libraryId, { hash: ctx.params.str('hash') });
    return tree.resolve(libraryId, { fullpath: ctx.params.path('fullpath') });
  };
  const notEnabled = (what: string) => () => {
    throw new ServiceFault(FaultCode.FeatureNotEnabled, `${what} is not enabled on this service`);
  };

  on('ls', async (ctx, lib) => {
    const p = ctx.params;
    const tag = p.str('tag');
    const hashs = p.str('hashs');
    return queries.ls(lib, p.path('fullpath', { allowRoot: true }), {
      ...p.page(100),
      tags: tag ? parseTags(tag) : undefined,
      hashs: hashs ? hashs.split(',').map((h) => h.trim()).filter((h) => h !== '') : undefined,
    });
  });

  on('info', async (ctx, lib) => {
    const p = ctx.params;
    const attribute = p.int('attribute', 0);
    if (![0, 1, 10].includes(attribute)) throw badParam('attribute', '0, 1 or 10', p.str('attribute'));
    const nop = p.int('nop', 0, { min: 0, max: 1 }) === 1;
    // The entry, its record and its metadata in one statement.
    const hash = p.has('hash') && p.str('hash') !== '' ? p.str('hash') : undefined;
    const { row, record, metadata } = await queries.details(lib, hash !== undefined ? { hash } : { fullpath: p.path('fullpath') });
    let content = { filehash: row.filehash, filesize: row.filesize };
    const hid = p.str('hid');
    if (hid) {
      const e = await queries.event(row, hid);
      content = { filehash: e.filehash, filesize: e.filesize };
    }
    const basic = { hash: row.hash, dir: row.dir, fullpath: row.fullpath, filename: row.name, filehash: row.dir ? '' : content.filehash, filesize: row.dir ? 0 : content.filesize };
    if (attribute === 10) return basic;
    // Links to the preview page and (images) the thumbnail of the version shown, valid 10 minutes.
    const links = row.dir ? undefined : parts.previews.issue({
      libraryId: lib, fullpath: row.fullpath, filehash: content.filehash, filename: row.name, filesize: content.filesize, thumbnail: true, baseUrl: parts.baseUrl,
    });
    const info: FileInfo & Record<string, unknown> = {
      ...record, ...basic,
      uri: row.dir ? '' : downloads.url({ sha1: content.filehash, size: content.filesize, filename: row.name, modifiedMs: row.last_ms, libraryId: lib }),
      preview: links?.url ?? '', thumbnail: links?.thumbnail ?? '', tag: tagsOf(row.tags).join(';'),
      lock: row.lock_member_name !== null ? 1 : 0,
      lock_member_name: row.lock_member_name ?? '',
      permission: ALL_PERMISSIONS,
    };
    if (nop) {
      // The library API holds every permission at the library level; no folder permission names it as
      // a subject, so once the library level is left out nothing remains.
      info.permission = [];
      info.property = { ...info.property, permisson: [] };
    }
    if (metadata) info.metadata = metadata;
    else delete info.metadata;
    if (attribute === 1) Object.assign(info, await queries.folderTotals(row));
    const ignores = (p.str('ignores') ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
    for (const name of ignores) {
      if (!INFO_IGNORES.has(name)) throw badParam('ignores', `a comma-separated subset of ${[...INFO_IGNORES].join(',')}`, p.str('ignores'));
      if (name === 'url') delete info.uri;
      else if (name === 'lock') { delete info.lock; delete info.lock_member_name; }
      else delete info[name];
    }
    return info;
  });

  on('create_folder', async (ctx, lib) => {
    const row = await tree.createFolder(lib, ctx.params.path('fullpath'), await op(ctx));
    return { hash: row.hash, fullpath: row.fullpath };
  });

  on('create_file', async (ctx, lib) => {
    const p = ctx.params;
    if (ctx.file) return createWithContent(ctx, lib, ctx.file);
    const filehash = p.required('filehash');
    if (!SHA1_RE.test(filehash)) throw badParam('filehash', 'SHA-1 as 40 lowercase hex characters', filehash);
    const filesize = p.int('filesize', -1, { min: 0 });
    if (filesize < 0) throw badParam('filesize', 'a size in bytes', p.str('filesize') ?? null);
    const overwrite = p.int('overwrite', 0, { min: 0, max: 1 }) === 1;
    return uploads.create(lib, p.path('fullpath'), filehash, filesize, overwrite, await op(ctx), parts.uploadServerUrl);
  });

  /**
   * create_file with the content as a multipart file part (the official SDKs' createFile, files up to
   * 50 MB): the file is written at once. Declared filehash/filesize, when given, must match the part.
   * Answers the record of the file (hash, fullpath, filehash, filesize) with state 1.
   */
  const createWithContent = async (ctx: RequestContext, lib: number, file: ReceivedFile) => {
    const p = ctx.params;
    const filefield = p.str('filefield') || 'file';
    if (file.field !== filefield) throw badParam(filefield, `the file as form part '${filefield}' (filefield)`, file.field);
    if (p.str('filehash') !== file.sha1) throw badParam('filehash', `the SHA-1 of the file part (${file.sha1})`, p.str('filehash') ?? null);
    if (p.str('filesize') !== String(file.size)) throw badParam('filesize', `the size of the file part (${file.size})`, p.str('filesize') ?? null);
    const fullpath = p.path('fullpath');
    const overwrite = p.int('overwrite', 0, { min: 0, max: 1 }) === 1;
    const operator = await op(ctx);
    const row = await parts.content.ingest(lib, { tempFilePath: file.tempFilePath, sha1: file.sha1, size: file.size },
      async (c) => tree.placeContent(lib, fullpath, c, overwrite, operator));
    return { hash: row.hash, fullpath: row.fullpath, filehash: row.filehash, filesize: row.filesize, state: 1, server: parts.uploadServerUrl };
  };

  on('upload_servers', (ctx, lib) => {
    const p = ctx.params;
    const fullpath = p.path('fullpath', { allowRoot: true });
    p.required('rand');
    const timeoutSec = p.requiredInt('timeout', { min: 1, max: 7 * 86_400 });
    return parts.uploadServer.issueWebUploadKey({ libraryId: lib, fullpath, timeoutSec, serverUrl: parts.uploadServerUrl });
  });

  on('download_url', async (ctx, lib) => {
    const p = ctx.params;
    const row = await target(ctx, lib);
    if (row.dir) throw new ServiceFault(FaultCode.NotAFolder, `${JSON.stringify(row.fullpath)} is a folder; only files have download links`);
    const filehash = p.str('filehash') || row.filehash;
    if (!SHA1_RE.test(filehash)) throw badParam('filehash', 'SHA-1 as 40 lowercase hex characters', filehash);
    if (!await queries.hasVersion(row, filehash)) throw new ServiceFault(FaultCode.FileMissing, `no version ${filehash} of ${JSON.stringify(row.fullpath)}`);
    const size = filehash === row.filehash ? row.filesize : await blobSize(parts, filehash);
    const filename = p.str('filename') || row.name;
    return { urls: [downloads.url({ sha1: filehash, size, filename, open: p.flag('open'), modifiedMs: row.last_ms, libraryId: lib })] };
  });

  on('move', async (ctx, lib) => {
    await tree.move(lib, ctx.params.path('fullpath'), ctx.params.path('dest_fullpath'), await op(ctx));
  });

  on('del', async (ctx, lib) => {
    const p = ctx.params;
    const destroy = p.flag('destroy');
    const tag = p.str('tag');
    if (tag !== undefined && tag !== '') {
      await tree.removeByTags(lib, parseTags(tag), p.path('path', { allowRoot: true }), destroy, await op(ctx));
    } else if (p.has('fullpaths')) {
      // The official SDKs delete with `fullpaths` (`|`-separated, as recover and del_completely take):
      // all of them or none.
      // A path inside another one of the list goes with it (listed once).
      const listed = [...new Set(p.paths('fullpaths'))];
      const paths = listed.filter((a) => !listed.some((b) => b !== a && a.startsWith(b + '/')));
      await tree.tx(async () => { for (const path of paths) await tree.remove(lib, path, destroy, await op(ctx)); }, lib);
    } else {
      await tree.remove(lib, p.path('fullpath'), destroy, await op(ctx));
    }
    parts.content.scheduleCollect();
  });

  on('del_completely', async (ctx, lib) => {
    const p = ctx.params;
    const tag = p.str('tag');
    if (tag) await tree.destroy(lib, { tags: parseTags(tag) }, await op(ctx));
    else await tree.destroy(lib, { fullpaths: p.paths('fullpaths') }, await op(ctx));
    parts.content.scheduleCollect();
  });

  on('recycle', async (ctx, lib) => {
    const p = ctx.params;
    return queries.recycle(lib, p.page(100), p.str('order') || undefined, p.str('keyword') || undefined);
  });

  on('recover', async (ctx, lib) => {
    await tree.recover(lib, ctx.params.paths('fullpaths'), await op(ctx));
  });

  on('history', async (ctx, lib) => queries.history(lib, ctx.params.path('fullpath'), ctx.params.page(20)));

  on('lock', async (ctx, lib) => {
    const mode = ctx.params.required('lock');
    if (mode !== 'lock' && mode !== 'unlock') throw badParam('lock', "'lock' or 'unlock'", mode);
    await tree.setLock(lib, ctx.params.path('fullpath'), mode === 'lock', await op(ctx));
  });

  const tagChange = (add: boolean) => async (ctx: RequestContext, lib: number) => {
    const tags = parseTags(ctx.params.required('tag'));
    if (tags.length === 0) throw badParam('tag', 'one or more tags separated by ;', ctx.params.str('tag'));
    await tree.changeTags(lib, ctx.params.path('fullpath', { allowRoot: false }), tags, add, await op(ctx));
  };
  on('add_tag', tagChange(true));
  on('del_tag', tagChange(false));

  on('stat', async (_ctx, lib) => queries.stat(lib));

  on('copy', async (ctx, lib) => {
    const p = ctx.params;
    return copies.copy(lib, p.path('from_fullpath'), p.path('fullpath'), p.int('overwrite', 0, { min: 0, max: 1 }) === 1, await op(ctx));
  });

  on('mcopy', async (ctx, lib) => {
    const p = ctx.params;
    const folders = p.required('paths').split('|').map((f) => normalizePath('paths', f, { allowRoot: true }));
    return copies.mcopy(lib, p.paths('from_fullpaths'), folders, await op(ctx));
  });

  on('queue_status', async (ctx, lib) => copies.status(lib, ctx.params.required('queue_id')));

  on('search', async (ctx, lib) => {
    const p = ctx.params;
    const scope = parseScope(p.str('scope'));
    if (scope.content) throw new ServiceFault(FaultCode.FeatureNotEnabled, 'full-text search (scope content) is not enabled on this service');
    return queries.search(lib, p.required('keywords'), p.path('path', { allowRoot: true }), scope, p.page(100));
  });

  on('updates', async (ctx, lib) => {
    const p = ctx.params;
    const mode = p.str('mode') ?? '';
    if (mode !== '' && mode !== 'compare') throw badParam('mode', "'' or 'compare'", mode);
    const dirParam = p.str('dir');
    const dir = dirParam === undefined || dirParam === '' ? undefined : p.int('dir', 0, { min: 0, max: 1 });
    return queries.updates(lib, { compare: mode === 'compare', fetchMs: p.int('fetch_dateline', 0, { min: 0 }), dir });
  });

  on('updates_count', async (ctx, lib) => {
    const p = ctx.params;
    return { count: await queries.updatesCount(lib, p.int('begin_dateline', 0, { min: 0 }), p.int('end_dateline', 0, { min: 0 }), p.flag('showdel')) };
  });

  on('link', async (ctx, lib) => parts.links.createLink(lib, ctx.params.raw, { opId: ctx.params.str('op_id'), opName: (await operatorOf(ctx, directory)).name }));
  on('links', (ctx, lib) => parts.links.listLinks(lib, ctx.params.raw));
  on('link_close', async (ctx, lib) => {
    await parts.links.closeLinks(lib, ctx.params.raw, { opId: ctx.params.str('op_id'), opName: (await operatorOf(ctx, directory)).name });
  });

  on('preview_url', async (ctx, lib) => {
    const p = ctx.params;
    const row = await target(ctx, lib);
    return previewUrlResult(parts.previews, { libraryId: lib, fullpath: row.fullpath, filename: row.name, filehash: row.filehash, filesize: row.filesize, dir: !!row.dir }, {
      watermark: p.str('watermark'), wm_content: p.str('wm_content'), member_name: p.str('member_name'), thumbnail: p.str('thumbnail'),
      annotation: p.str('annotation'), annotation_mode: p.str('annotation_mode'),
    }, parts.baseUrl);
  });
  on('preview_download_url', notEnabled('export (preview_download_url)'));
  on('cedit_url', notEnabled('co-editing (cedit_url)'));
}

/** `scope`: JSON array of filename, tag, content; default [filename, tag]. */
function parseScope(raw: string | undefined): { filename: boolean; tag: boolean; content: boolean } {
  if (raw === undefined || raw === '') return { filename: true, tag: true, content: false };
  let list: unknown;
  try {
    list = JSON.parse(raw);
  } catch {
    list = undefined;
  }
  const ok = Array.isArray(list) && list.length > 0 && list.every((s) => s === 'filename' || s === 'tag' || s === 'content');
  if (!ok) throw badParam('scope', 'a JSON array of "filename", "tag", "content"', raw);
  const set = new Set(list as string[]);
  return { filename: set.has('filename'), tag: set.has('tag'), content: set.has('content') };
}

async function blobSize(parts: ServiceParts, sha1: string): Promise<number> {
  const row = await parts.tree.db.get('SELECT size FROM blobs WHERE sha1 = ?', [sha1]) as { size: number } | undefined;
  if (!row) throw new ServiceFault(FaultCode.FileMissing, `content ${sha1} is no longer stored`);
  return row.size;
}
