/** PROPFIND (depth 0 and 1; infinity refused as RFC 4918 allows) and PROPPATCH (atomic, RFC 4918 §9.2). */
import type { Attr, StatFs } from '../../vfs/types.js';
import { DavRequest } from '../context.js';
import { PropertyLimitError, type DeadProperty } from '../dead-properties.js';
import { DavError, statusOf } from '../errors.js';
import { CLOUDLIB_NS, isProtected, MULTISTATUS_CLOSE, MULTISTATUS_OPEN, propfindResponse, propXml, statusLine, type LiveSources, type PropfindRequest, type PropName } from '../properties.js';
import { sendXml } from '../reply.js';
import { child, DAV, parseXml, serializeContent, XmlBodyError, type XmlElement } from '../xml.js';
import { escapeXml } from '../xml.js';
import { hrefOf, isTopLevel } from '../paths.js';

function parsePropfind(body: string): PropfindRequest {
  if (body.trim() === '') return { kind: 'allprop', include: [] };
  const root = parseXml(body);
  if (root.ns !== DAV || root.name !== 'propfind') throw new XmlBodyError(`expected a DAV:propfind element, got ${root.name}`);
  const prop = child(root, DAV, 'prop');
  if (prop) return { kind: 'prop', props: prop.children.map((c) => ({ ns: c.ns, name: c.name })) };
  if (child(root, DAV, 'propname')) return { kind: 'propname' };
  if (child(root, DAV, 'allprop')) return { kind: 'allprop', include: (child(root, DAV, 'include')?.children ?? []).map((c) => ({ ns: c.ns, name: c.name })) };
  throw new XmlBodyError('expected prop, propname or allprop inside propfind, got none');
}

/** Live-property sources for one request: quota asked once per library, tags by name. */
function liveSources(r: DavRequest): LiveSources {
  const quota = new Map<string, Promise<StatFs | undefined>>();
  return {
    locks: r.shared.locks,
    statfs(path) {
      const lib = path.split('/')[1] ?? '';
      let q = quota.get(lib);
      if (!q) quota.set(lib, (q = r.vfs.statfs(path === '/' ? '/' : `/${lib}`, r.call).catch(() => undefined)));
      return q;
    },
    async tags(a) {
      if (r.isJunk(a.path)) return undefined;
      return r.vfs.getTags(a.path, r.call).catch(() => a.tags);
    },
  };
}

export async function propfind(r: DavRequest): Promise<void> {
  const depthHeader = (r.req.headers.depth ?? 'infinity').toString().trim().toLowerCase();
  if (depthHeader !== '0' && depthHeader !== '1') {
    if (depthHeader === 'infinity') throw new DavError(403, 'PROPFIND with Depth: infinity is not supported; use Depth 0 or 1', 'propfind-finite-depth');
    throw new DavError(400, `expected Depth 0, 1 or infinity, got '${depthHeader}'`);
  }
  const request = parsePropfind(await r.bodyText());
  const self = await r.stat(r.path);
  if (!self) throw new DavError(404, `no such file or folder: ${r.path}`);
  const src = liveSources(r);
  const deadOf = (a: Attr) => (): Promise<DeadProperty[]> => r.shared.props.get(a);
  const parts: string[] = [MULTISTATUS_OPEN, await propfindResponse(self, request, deadOf(self), src)];
  if (depthHeader === '1' && self.isDir) {
    const children = await r.vfs.readdir(r.path, r.call);
    if (r.shared.keepJunkLocal && r.path !== '/') {
      const names = new Set(children.map((c) => c.name));
      for (const j of await r.shared.junk.list(r.path)) if (!names.has(j.name)) children.push(j);
    }
    for (const c of children) parts.push(await propfindResponse(c, request, deadOf(c), src));
  }
  parts.push(MULTISTATUS_CLOSE);
  sendXml(r.res, 207, parts.join(''));
}

interface PatchOp { kind: 'set' | 'remove'; prop: PropName; el: XmlElement }

function parsePropertyUpdate(body: string): PatchOp[] {
  const root = parseXml(body);
  if (root.ns !== DAV || root.name !== 'propertyupdate') throw new XmlBodyError(`expected a DAV:propertyupdate element, got ${root.name}`);
  const ops: PatchOp[] = [];
  for (const block of root.children) {
    if (block.ns !== DAV || (block.name !== 'set' && block.name !== 'remove')) continue;
    const prop = child(block, DAV, 'prop');
    if (!prop) throw new XmlBodyError(`expected a DAV:prop inside ${block.name}, got none`);
    for (const el of prop.children) ops.push({ kind: block.name, prop: { ns: el.ns, name: el.name }, el });
  }
  if (ops.length === 0) throw new XmlBodyError('expected at least one property to set or remove, got none');
  return ops;
}

/** Tag names from a tags property value: `<C:tag>` children, or comma-separated text. */
function tagsFrom(el: XmlElement): string[] {
  if (el.children.length > 0) return el.children.filter((c) => c.name === 'tag').map((c) => c.text.trim()).filter((t) => t !== '');
  return el.text.split(',').map((t) => t.trim()).filter((t) => t !== '');
}

const WIN32_NS = 'urn:schemas-microsoft-com:';

export async function proppatch(r: DavRequest): Promise<void> {
  r.assertWritable();
  const self = await r.stat(r.path);
  if (!self) throw new DavError(404, `no such file or folder: ${r.path}`);
  r.assertUnlocked(r.path);
  r.assertNotLockedElsewhere(self);
  const ops = parsePropertyUpdate(await r.bodyText());
  const isTags = (p: PropName): boolean => p.ns === CLOUDLIB_NS && p.name === 'tags';
  // Validate everything first: a protected property fails the whole request (the rest 424), nothing changes.
  const failures = new Map<string, number>();
  const values = new Map<XmlElement, string>();
  for (const op of ops) {
    const key = `${op.prop.ns}\0${op.prop.name}`;
    if (isProtected(op.prop)) failures.set(key, 403);
    else if (isTags(op.prop) && (isTopLevel(r.path) || r.isJunk(r.path))) failures.set(key, 403);
    else if (op.kind === 'set' && !isTags(op.prop)) {
      // A value larger than one property may hold cannot be stored (RFC 4918 §9.2.1: 507).
      const xml = serializeContent(op.el);
      if (Buffer.byteLength(xml) > r.shared.maxPropertyValueBytes) failures.set(key, 507);
      else values.set(op.el, xml);
    }
  }
  const results: { prop: PropName; status: number }[] = [];
  const seen = new Set<string>();
  for (const op of ops) {
    const key = `${op.prop.ns}\0${op.prop.name}`;
    if (seen.has(key)) continue;
    seen.add(key);
    results.push({ prop: op.prop, status: failures.get(key) ?? (failures.size > 0 ? 424 : 200) });
  }
  if (failures.size === 0) {
    let tags: string[] | undefined;
    const set = new Map<string, DeadProperty>();
    const remove = new Map<string, PropName>();
    let mtimeMs: number | undefined;
    for (const op of ops) {
      const key = `${op.prop.ns}\0${op.prop.name}`;
      if (isTags(op.prop)) {
        tags = op.kind === 'set' ? tagsFrom(op.el) : [];
        continue;
      }
      if (op.kind === 'set') {
        set.set(key, { ...op.prop, xml: values.get(op.el) ?? serializeContent(op.el) });
        remove.delete(key);
        if (op.prop.ns === WIN32_NS && op.prop.name === 'Win32LastModifiedTime') {
          const t = Date.parse(op.el.text);
          if (Number.isFinite(t)) mtimeMs = t;
        }
      } else {
        set.delete(key);
        remove.set(key, op.prop);
      }
    }
    try {
      if (tags !== undefined) await r.vfs.setTags(r.path, tags, r.call);
      if (set.size > 0 || remove.size > 0) await r.shared.props.update(self, [...set.values()], [...remove.values()]);
    } catch (err) {
      if (err instanceof PropertyLimitError) {
        // Nothing was stored: the properties set are what did not fit (507), the rest fail with them (424).
        for (const x of results) x.status = set.has(`${x.prop.ns}\0${x.prop.name}`) ? 507 : 424;
        r.shared.logger.debug({ path: r.path, reason: err.message }, 'webdav: PROPPATCH refused: property limits');
      } else {
        const status = statusOf(err);
        for (const x of results) x.status = status;
        r.shared.logger.warn({ err, path: r.path }, 'webdav: PROPPATCH failed');
      }
    }
    if (mtimeMs !== undefined && !r.isJunk(r.path)) {
      await r.vfs.setTimes(r.path, mtimeMs, r.call).catch((err: unknown) => r.shared.logger.debug({ err, path: r.path }, 'webdav: Win32LastModifiedTime not applied'));
    }
  }
  const byStatus = new Map<number, PropName[]>();
  for (const x of results) {
    const group = byStatus.get(x.status);
    if (group) group.push(x.prop);
    else byStatus.set(x.status, [x.prop]);
  }
  let xml = `${MULTISTATUS_OPEN}<D:response><D:href>${escapeXml(hrefOf(self.path, self.isDir))}</D:href>`;
  for (const [status, props] of byStatus) xml += `<D:propstat><D:prop>${props.map((p) => propXml(p, '')).join('')}</D:prop><D:status>${statusLine(status)}</D:status></D:propstat>`;
  sendXml(r.res, 207, xml + `</D:response>${MULTISTATUS_CLOSE}`);
}
