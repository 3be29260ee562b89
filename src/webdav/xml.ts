/**
 * XML of WebDAV bodies: a namespace-resolving reader over fast-xml-parser (well-formedness checked first),
 * and the small writer the responses use. Elements are `{ ns, name, attrs, children, text }` with the
 * namespace URI resolved from `xmlns` declarations, so `<D:prop xmlns:D="DAV:">` and
 * `<prop xmlns="DAV:">` are the same element.
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser';

export const DAV = 'DAV:';

export interface XmlElement {
  /** Namespace URI ('' for none). */
  ns: string;
  /** Local name. */
  name: string;
  /** Attributes without namespace declarations, by qualified name as written. */
  attrs: Record<string, string>;
  children: XmlElement[];
  /** Concatenated character data directly inside the element. */
  text: string;
}

/** A body that is not well-formed XML, or not the element expected. */
export class XmlBodyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'XmlBodyError';
  }
}

const parser = new XMLParser({
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: '',
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: false,
  processEntities: false,
  htmlEntities: false,
  ignoreDeclaration: true,
  ignorePiTags: true,
  allowBooleanAttributes: false,
});

const ENTITY = /&(#x[0-9a-fA-F]+|#[0-9]+|amp|lt|gt|quot|apos);/g;
const NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

/** Decodes the XML predefined entities and character references. */
export function decodeEntities(s: string): string {
  if (!s.includes('&')) return s;
  return s.replace(ENTITY, (_m, e: string) => {
    if (e.startsWith('#x')) return safeCodePoint(Number.parseInt(e.slice(2), 16));
    if (e.startsWith('#')) return safeCodePoint(Number.parseInt(e.slice(1), 10));
    return NAMED[e]!;
  });
}

function safeCodePoint(n: number): string {
  if (!Number.isInteger(n) || n < 1 || n > 0x10ffff || (n >= 0xd800 && n <= 0xdfff)) throw new XmlBodyError(`expected a valid character reference, got &#${n};`);
  return String.fromCodePoint(n);
}

type RawNode = Record<string, unknown>;

/**
 * Parses an XML request body. Throws XmlBodyError for anything not well-formed (with the parser's
 * reason) or an undeclared namespace prefix.
 */
export function parseXml(body: string): XmlElement {
  if (body.trim() === '') throw new XmlBodyError('expected an XML body, got an empty one');
  if (/<!DOCTYPE|<!ENTITY/i.test(body)) throw new XmlBodyError('expected XML without a document type declaration, got one');
  const valid = XMLValidator.validate(body);
  if (valid !== true) throw new XmlBodyError(`expected well-formed XML, got: ${valid.err.msg} (line ${valid.err.line})`);
  let raw: RawNode[];
  try {
    raw = parser.parse(body) as RawNode[];
  } catch (err) {
    throw new XmlBodyError(`expected well-formed XML, got: ${(err as Error).message}`);
  }
  const roots = raw.filter((n) => elementKey(n) !== undefined);
  if (roots.length !== 1) throw new XmlBodyError(`expected one root element, got ${roots.length}`);
  return toElement(roots[0]!, new Map([['xml', 'http://www.w3.org/XML/1998/namespace']]), 0);
}

function elementKey(n: RawNode): string | undefined {
  return Object.keys(n).find((k) => k !== ':@' && k !== '#text' && k !== '#comment' && !k.startsWith('?'));
}

function toElement(node: RawNode, scope: Map<string, string>, depth: number): XmlElement {
  if (depth > 64) throw new XmlBodyError('expected XML nested at most 64 deep, got deeper');
  const qname = elementKey(node)!;
  const rawAttrs = (node[':@'] ?? {}) as Record<string, string>;
  let inner = scope;
  const attrs: Record<string, string> = {};
  for (const [k, v] of Object.entries(rawAttrs)) {
    if (k === 'xmlns' || k.startsWith('xmlns:')) {
      if (k !== 'xmlns' && String(v) === '') throw new XmlBodyError(`expected a namespace URI for prefix '${k.slice(6)}', got an empty one`);
      if (inner === scope) inner = new Map(scope);
      inner.set(k === 'xmlns' ? '' : k.slice(6), decodeEntities(String(v)));
    } else {
      attrs[k] = decodeEntities(String(v));
    }
  }
  const colon = qname.indexOf(':');
  const prefix = colon >= 0 ? qname.slice(0, colon) : '';
  const name = colon >= 0 ? qname.slice(colon + 1) : qname;
  const ns = inner.get(prefix);
  if (ns === undefined && prefix !== '') throw new XmlBodyError(`expected a declared namespace prefix, got '${prefix}:' undeclared`);
  const children: XmlElement[] = [];
  let text = '';
  for (const c of (node[qname] ?? []) as RawNode[]) {
    if ('#text' in c) text += decodeEntities(String(c['#text']));
    else if (elementKey(c) !== undefined) children.push(toElement(c, inner, depth + 1));
  }
  return { ns: ns ?? '', name, attrs, children, text };
}

/** The first child with this namespace and local name. */
export function child(el: XmlElement | undefined, ns: string, name: string): XmlElement | undefined {
  return el?.children.find((c) => c.ns === ns && c.name === name);
}

/** Escapes character data and attribute values. */
export function escapeXml(s: string): string {
  return s.replace(/[&<>"]/g, (c) => (c === '&' ? '&amp;' : c === '<' ? '&lt;' : c === '>' ? '&gt;' : '&quot;'));
}

/**
 * Serialises an element with explicit namespace declarations (a default `xmlns` wherever the namespace
 * changes), so the fragment stands alone: how dead property values are stored and returned.
 */
export function serializeElement(el: XmlElement, parentNs?: string): string {
  const decl = el.ns !== parentNs ? ` xmlns="${escapeXml(el.ns)}"` : '';
  const attrs = Object.entries(el.attrs)
    .filter(([k]) => !k.includes(':') || k.startsWith('xml:'))
    .map(([k, v]) => ` ${k}="${escapeXml(v)}"`)
    .join('');
  const inner = el.children.length > 0 ? el.children.map((c) => serializeElement(c, el.ns)).join('') : escapeXml(el.text);
  return `<${el.name}${decl}${attrs}>${inner}</${el.name}>`;
}

/** The content of an element serialised (children, or its text), for storing a property value. */
export function serializeContent(el: XmlElement): string {
  return el.children.length > 0 ? el.children.map((c) => serializeElement(c)).join('') : escapeXml(el.text);
}

/** The XML declaration every body starts with. */
export const XML_HEAD = '<?xml version="1.0" encoding="utf-8"?>\n';
