/**
 * WebDAV properties: the live ones (computed from the Vfs's attributes, lock table and quota), the
 * cloudlib tags and state properties, and the XML of `<D:response>` elements of a multistatus body.
 */
import type { Attr, StatFs } from '../vfs/types.js';
import { contentTypeOf } from './content-type.js';
import { etagOf } from './context.js';
import type { DeadProperty } from './dead-properties.js';
import type { DavLock, LockTable } from './lock-table.js';
import { hrefOf } from './paths.js';
import { DAV, escapeXml } from './xml.js';

/** Namespace of the gateway's own properties. */
export const CLOUDLIB_NS = 'urn:cloudlib:props';

/**
 * ownCloud's namespace: its `checksums` property is where rclone's WebDAV backend (`--webdav-vendor
 * owncloud`) reads a file's hashes.
 */
export const OWNCLOUD_NS = 'http://owncloud.org/ns';

export interface PropName { ns: string; name: string }

/** `oc:checksums`: read-only, only when asked by name. */
function isChecksums(p: PropName): boolean {
  return p.ns === OWNCLOUD_NS && p.name === 'checksums';
}

/**
 * The SHA-1 the service keeps for a file, as ownCloud's `checksums` carries it; only when already known
 * (never computed for a PROPFIND) and not while a local version waits for its upload.
 */
export function checksumsValue(a: Attr): string | undefined {
  if (a.isDir || a.dirty || !a.contentHash || !/^[0-9a-f]{40}$/i.test(a.contentHash)) return undefined;
  return `<checksum>SHA1:${a.contentHash.toLowerCase()}</checksum>`;
}

/** Live properties returned by allprop (RFC 4918 §9.1; quota properties only when asked, RFC 4331). */
export const ALLPROP_LIVE = ['resourcetype', 'creationdate', 'getlastmodified', 'getcontentlength', 'getcontenttype', 'getetag', 'displayname', 'supportedlock', 'lockdiscovery'];
const OTHER_LIVE = ['quota-available-bytes', 'quota-used-bytes'];
/** Every live DAV: property (none can be set by PROPPATCH). */
export const LIVE_DAV = new Set([...ALLPROP_LIVE, ...OTHER_LIVE]);

/** `C:state`: a file's state (src/vfs/file-state.ts), read-only; folders have none. */
export const STATE_PROP: PropName = { ns: CLOUDLIB_NS, name: 'state' };

function isState(p: PropName): boolean {
  return p.ns === STATE_PROP.ns && p.name === STATE_PROP.name;
}

export function isProtected(p: PropName): boolean {
  return (p.ns === DAV && LIVE_DAV.has(p.name)) || isChecksums(p) || isState(p);
}

/** XML of one property element with its value. */
export function propXml(p: PropName, inner: string): string {
  if (p.ns === DAV) return inner === '' ? `<D:${p.name}/>` : `<D:${p.name}>${inner}</D:${p.name}>`;
  if (p.ns === CLOUDLIB_NS) return inner === '' ? `<C:${p.name}/>` : `<C:${p.name}>${inner}</C:${p.name}>`;
  const decl = ` xmlns="${escapeXml(p.ns)}"`;
  return inner === '' ? `<${p.name}${decl}/>` : `<${p.name}${decl}>${inner}</${p.name}>`;
}

export function activeLockXml(lock: DavLock, locks: LockTable): string {
  const remaining = locks.remainingS(lock);
  return (
    `<D:activelock><D:locktype><D:write/></D:locktype><D:lockscope><D:${lock.scope}/></D:lockscope>` +
    `<D:depth>${lock.depth === 0 ? '0' : 'infinity'}</D:depth>` +
    (lock.ownerXml ? `<D:owner>${lock.ownerXml}</D:owner>` : '') +
    `<D:timeout>${remaining === null ? 'Infinite' : `Second-${remaining}`}</D:timeout>` +
    `<D:locktoken><D:href>${escapeXml(lock.token)}</D:href></D:locktoken>` +
    `<D:lockroot><D:href>${escapeXml(hrefOf(lock.root, false))}</D:href></D:lockroot></D:activelock>`
  );
}

const SUPPORTED_LOCK =
  '<D:lockentry><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>' +
  '<D:lockentry><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>';

/** What computing live properties may need beyond the attributes. */
export interface LiveSources {
  locks: LockTable;
  /** Quota of the path's library (asked lazily, once per library per request). */
  statfs(path: string): Promise<StatFs | undefined>;
  /** Tags of the object (asked when the tags property is requested by name). */
  tags(a: Attr): Promise<string[] | undefined>;
}

/** The value of a live property, or undefined when the resource has no such property. */
export async function liveValue(a: Attr, name: string, src: LiveSources): Promise<string | undefined> {
  switch (name) {
    case 'resourcetype': return a.isDir ? '<D:collection/>' : '';
    case 'creationdate': return new Date(a.ctimeMs).toISOString().replace(/\.\d{3}Z$/, 'Z');
    case 'getlastmodified': return new Date(a.mtimeMs).toUTCString();
    case 'displayname': return escapeXml(a.name);
    case 'getcontentlength': return a.isDir ? undefined : String(a.size);
    case 'getcontenttype': return a.isDir ? undefined : escapeXml(contentTypeOf(a.name));
    case 'getetag': return a.isDir ? undefined : escapeXml(etagOf(a));
    case 'supportedlock': return a.path === '/' ? undefined : SUPPORTED_LOCK;
    case 'lockdiscovery': return src.locks.covering(a.path).map((l) => activeLockXml(l, src.locks)).join('');
    case 'quota-available-bytes':
    case 'quota-used-bytes': {
      const q = await src.statfs(a.path);
      if (!q) return undefined;
      // An unlimited quota has no bytes available to say (RFC 4331 §3: the property is then left out),
      // rather than a made-up 8 PiB.
      if (name === 'quota-available-bytes' && q.total >= Number.MAX_SAFE_INTEGER) return undefined;
      return String(name === 'quota-used-bytes' ? q.used : Math.min(q.free, Number.MAX_SAFE_INTEGER));
    }
    default: return undefined;
  }
}

export function tagsXml(tags: string[]): string {
  return tags.map((t) => `<C:tag>${escapeXml(t)}</C:tag>`).join('');
}

/** What a PROPFIND asks for. */
export type PropfindRequest = { kind: 'allprop'; include: PropName[] } | { kind: 'propname' } | { kind: 'prop'; props: PropName[] };

/** `<D:response>` of one resource for a PROPFIND. */
export async function propfindResponse(a: Attr, req: PropfindRequest, dead: () => Promise<DeadProperty[]>, src: LiveSources): Promise<string> {
  const found: string[] = [];
  const missing: string[] = [];
  const href = `<D:href>${escapeXml(hrefOf(a.path, a.isDir))}</D:href>`;
  const tagsProp = { ns: CLOUDLIB_NS, name: 'tags' };
  if (req.kind === 'propname') {
    for (const n of ALLPROP_LIVE) if ((await liveValue(a, n, src)) !== undefined) found.push(`<D:${n}/>`);
    if (a.path.split('/').length > 2) found.push(propXml(tagsProp, ''));
    if (a.state !== undefined) found.push(propXml(STATE_PROP, ''));
    for (const d of await dead()) found.push(propXml(d, ''));
  } else {
    const wanted = req.kind === 'allprop' ? [...ALLPROP_LIVE.map((name) => ({ ns: DAV, name })), ...req.include] : req.props;
    const deadProps = req.kind === 'allprop' || wanted.some((p) => !(p.ns === DAV && LIVE_DAV.has(p.name)) && p.ns !== CLOUDLIB_NS && !isChecksums(p)) ? await dead() : [];
    const seen = new Set<string>();
    for (const p of wanted) {
      const key = `${p.ns}\0${p.name}`;
      if (seen.has(key)) continue;
      seen.add(key);
      let value: string | undefined;
      if (p.ns === DAV && LIVE_DAV.has(p.name)) value = await liveValue(a, p.name, src);
      else if (isChecksums(p)) value = checksumsValue(a);
      else if (isState(p)) value = a.state === undefined ? undefined : escapeXml(a.state);
      else if (p.ns === CLOUDLIB_NS && p.name === 'tags') {
        const tags = a.path.split('/').length > 2 ? await src.tags(a) : undefined;
        value = tags ? tagsXml(tags) : undefined;
      } else value = deadProps.find((d) => d.ns === p.ns && d.name === p.name)?.xml;
      if (value === undefined) {
        if (req.kind === 'prop') missing.push(propXml(p, ''));
      }
      else found.push(propXml(p, value));
    }
    if (req.kind === 'allprop') {
      for (const d of deadProps) if (!seen.has(`${d.ns}\0${d.name}`)) found.push(propXml(d, d.xml));
      if (a.tags && a.tags.length > 0 && !seen.has(`${CLOUDLIB_NS}\0tags`)) found.push(propXml(tagsProp, tagsXml(a.tags)));
      if (a.state !== undefined && !seen.has(`${CLOUDLIB_NS}\0state`)) found.push(propXml(STATE_PROP, escapeXml(a.state)));
    }
  }
  let xml = `<D:response>${href}`;
  if (found.length > 0) xml += `<D:propstat><D:prop>${found.join('')}</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>`;
  if (missing.length > 0) xml += `<D:propstat><D:prop>${missing.join('')}</D:prop><D:status>HTTP/1.1 404 Not Found</D:status></D:propstat>`;
  if (found.length === 0 && missing.length === 0) xml += `<D:propstat><D:prop/><D:status>HTTP/1.1 200 OK</D:status></D:propstat>`;
  return xml + '</D:response>';
}

/** Opening of a multistatus body (namespaces declared once). */
export const MULTISTATUS_OPEN = `<?xml version="1.0" encoding="utf-8"?>\n<D:multistatus xmlns:D="DAV:" xmlns:C="${CLOUDLIB_NS}">`;
export const MULTISTATUS_CLOSE = '</D:multistatus>';

const REASONS: Record<number, string> = {
  200: 'OK', 201: 'Created', 204: 'No Content', 400: 'Bad Request', 403: 'Forbidden', 404: 'Not Found', 409: 'Conflict',
  412: 'Precondition Failed', 423: 'Locked', 424: 'Failed Dependency', 500: 'Internal Server Error', 502: 'Bad Gateway', 507: 'Insufficient Storage',
};

export function statusLine(status: number): string {
  return `HTTP/1.1 ${status} ${REASONS[status] ?? 'Status'}`;
}

/** `<D:response>` with an href and a status (DELETE, COPY, MOVE of a tree). */
export function statusResponse(href: string, status: number): string {
  return `<D:response><D:href>${escapeXml(href)}</D:href><D:status>${statusLine(status)}</D:status></D:response>`;
}
