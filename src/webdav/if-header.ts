/**
 * The WebDAV `If` request header (RFC 4918 §10.4): parsing into lists of conditions, and evaluation
 * against the state of the resources it names. A header that cannot be parsed is a 400, never a crash.
 */
import { DavError } from './errors.js';

export interface IfCondition {
  not: boolean;
  /** A state token (lock token or any URI), or undefined for an entity-tag condition. */
  token?: string;
  /** An entity tag, quotes included (`"abc"`, `W/"abc"`). */
  etag?: string;
}

export interface IfList {
  /** The resource tag (a URL or absolute path as sent), or undefined for the request URI. */
  resource?: string;
  conditions: IfCondition[];
}

/** Parses an If header. Throws DavError 400 on malformed input. */
export function parseIfHeader(header: string): IfList[] {
  const lists: IfList[] = [];
  let i = 0;
  let resource: string | undefined;
  let tagged: boolean | undefined;
  const bad = (why: string): DavError => new DavError(400, `expected an If header as RFC 4918 §10.4 defines, got ${why} at ${i}`);
  const ws = (): void => { while (i < header.length && /[\s]/.test(header[i]!)) i++; };
  const until = (end: string): string => {
    const j = header.indexOf(end, i + 1);
    if (j < 0) throw bad(`an unterminated '${header[i]}'`);
    const s = header.slice(i + 1, j);
    i = j + 1;
    return s;
  };
  ws();
  if (i >= header.length) throw bad('an empty header');
  while (i < header.length) {
    const c = header[i]!;
    if (c === '<') {
      if (tagged === false) throw bad('a resource tag after untagged lists');
      tagged = true;
      resource = until('>');
    } else if (c === '(') {
      if (tagged === undefined) tagged = false;
      if (tagged && resource === undefined) throw bad('a list without a resource tag');
      i++;
      const conditions: IfCondition[] = [];
      for (;;) {
        ws();
        if (i >= header.length) throw bad("an unterminated '('");
        if (header[i] === ')') { i++; break; }
        let not = false;
        if (header.slice(i, i + 3).toLowerCase() === 'not') {
          not = true;
          i += 3;
          ws();
        }
        const d = header[i];
        if (d === '<') conditions.push({ not, token: until('>') });
        else if (d === '[') conditions.push({ not, etag: until(']') });
        else throw bad(`'${d ?? 'end'}'`);
      }
      if (conditions.length === 0) throw bad('an empty list');
      lists.push({ resource: tagged ? resource : undefined, conditions });
    } else {
      throw bad(`'${c}'`);
    }
    ws();
  }
  if (lists.length === 0) throw bad('no list');
  return lists;
}

/** Every state token named in the header (the lock tokens a request submits). */
export function submittedTokens(lists: IfList[]): string[] {
  return lists.flatMap((l) => l.conditions.flatMap((c) => (c.token !== undefined ? [c.token] : [])));
}

/** What evaluation needs to know of a resource. */
export interface IfResourceState {
  /** Current entity tag, or undefined when the resource does not exist. */
  etag?: string;
  /** Tokens of the locks that cover the resource. */
  lockTokens: string[];
}

/** True when the header as a whole holds: any list whose conditions all hold. */
export async function evaluateIf(lists: IfList[], requestPath: string, pathOf: (resource: string) => string | undefined, stateOf: (path: string) => Promise<IfResourceState>): Promise<boolean> {
  const states = new Map<string, IfResourceState>();
  const state = async (path: string): Promise<IfResourceState> => {
    let s = states.get(path);
    if (!s) states.set(path, (s = await stateOf(path)));
    return s;
  };
  for (const list of lists) {
    const path = list.resource === undefined ? requestPath : pathOf(list.resource);
    if (path === undefined) continue;
    const s = await state(path);
    let ok = true;
    for (const c of list.conditions) {
      const holds = c.token !== undefined ? s.lockTokens.includes(c.token) : s.etag !== undefined && weakEqual(s.etag, c.etag!);
      if (holds === c.not) { ok = false; break; }
    }
    if (ok) return true;
  }
  return false;
}

function weakEqual(a: string, b: string): boolean {
  return a.replace(/^W\//, '') === b.replace(/^W\//, '');
}
