/**
 * MetadataTemplates: metadata templates of an enterprise (a key, a name, typed attributes), their links
 * to libraries, and the values set on files and folders (`set_metadata` / `del_metadata`). Values are
 * checked against the attribute types of the spec: string, number, date (`YYYY-MM-DD`), time
 * (`YYYY-MM-DD hh:mm:ss`), single choice (one of the options), multiple choice (array of options).
 */
import type { MetadataStore } from '../store/metadata-store.js';
import { FaultCode, ServiceFault, badParam } from './fault.js';
import { mapInOrder } from './in-order.js';

export const ATTRIBUTE_TYPES = ['string', 'number', 'date', 'time', 'single', 'multiple'] as const;
export type AttributeType = (typeof ATTRIBUTE_TYPES)[number];

export interface MetadataAttribute {
  key: string;
  name: string;
  type: AttributeType;
  /** Choices of `single` / `multiple`. */
  options?: string[];
}

export interface MetadataTemplate { key: string; name: string; attributes: MetadataAttribute[] }

const KEY_RE = /^[A-Za-z0-9_.-]{1,64}$/;
const DATE_RE = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIME_RE = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/;

/** Checks a template definition; returns it normalised. */
export function checkTemplate(t: unknown): MetadataTemplate {
  const o = t as Partial<MetadataTemplate> | null;
  if (typeof o !== 'object' || o === null) throw badParam('template', 'an object {key, name, attributes}', t);
  if (typeof o.key !== 'string' || !KEY_RE.test(o.key)) throw badParam('template.key', '1–64 letters, digits, _ . -', o.key);
  if (typeof o.name !== 'string' || o.name === '') throw badParam('template.name', 'a non-empty name', o.name);
  if (!Array.isArray(o.attributes) || o.attributes.length === 0) throw badParam('template.attributes', 'a non-empty array of attributes', o.attributes);
  const seen = new Set<string>();
  const attributes = o.attributes.map((a: Partial<MetadataAttribute>, i) => {
    const at = `template.attributes[${i}]`;
    if (typeof a?.key !== 'string' || !KEY_RE.test(a.key)) throw badParam(`${at}.key`, '1–64 letters, digits, _ . -', a?.key);
    if (seen.has(a.key)) throw badParam(`${at}.key`, 'a key not used twice', a.key);
    seen.add(a.key);
    if (!ATTRIBUTE_TYPES.includes(a.type as AttributeType)) throw badParam(`${at}.type`, `one of ${ATTRIBUTE_TYPES.join(', ')}`, a.type);
    const out: MetadataAttribute = { key: a.key, name: typeof a.name === 'string' && a.name !== '' ? a.name : a.key, type: a.type! };
    if (a.type === 'single' || a.type === 'multiple') {
      if (!Array.isArray(a.options) || a.options.length === 0 || !a.options.every((x) => typeof x === 'string')) throw badParam(`${at}.options`, 'a non-empty array of strings', a.options);
      out.options = a.options;
    }
    return out;
  });
  return { key: o.key, name: o.name, attributes };
}

/** Checks one value against its attribute; returns the value as stored. */
export function checkValue(attr: MetadataAttribute, value: unknown): unknown {
  const name = `metadata.${attr.key}`;
  switch (attr.type) {
    case 'string':
      if (typeof value !== 'string') throw badParam(name, 'a string', value);
      return value;
    case 'number': {
      const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
      if (typeof n !== 'number' || !Number.isFinite(n)) throw badParam(name, 'a number', value);
      return n;
    }
    case 'date':
      if (typeof value !== 'string' || !validDate(DATE_RE.exec(value))) throw badParam(name, 'a date YYYY-MM-DD', value);
      return value;
    case 'time': {
      const m = typeof value === 'string' ? TIME_RE.exec(value) : null;
      if (!m || !validDate(m) || Number(m[4]) > 23 || Number(m[5]) > 59 || Number(m[6]) > 59) throw badParam(name, 'a time YYYY-MM-DD hh:mm:ss', value);
      return value;
    }
    case 'single':
      if (typeof value !== 'string' || !attr.options!.includes(value)) throw badParam(name, `one of ${JSON.stringify(attr.options)}`, value);
      return value;
    case 'multiple':
      if (!Array.isArray(value) || !value.every((v) => typeof v === 'string' && attr.options!.includes(v))) throw badParam(name, `an array of ${JSON.stringify(attr.options)}`, value);
      return [...new Set(value as string[])];
  }
}

function validDate(m: RegExpExecArray | null): boolean {
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(y, mo - 1, d));
  return date.getUTCFullYear() === y && date.getUTCMonth() === mo - 1 && date.getUTCDate() === d;
}

export class MetadataTemplates {
  constructor(private readonly db: MetadataStore) {}

  /** Defines (or replaces) a template of an enterprise. */
  async define(entId: number, template: unknown): Promise<MetadataTemplate> {
    const t = checkTemplate(template);
    await this.db.run(`INSERT INTO metadata_templates (ent_id, key, name, attributes) VALUES (?, ?, ?, ?)
      ON CONFLICT (ent_id, key) DO UPDATE SET name = excluded.name, attributes = excluded.attributes`, [entId, t.key, t.name, JSON.stringify(t.attributes)]);
    return t;
  }

  async template(entId: number, key: string): Promise<MetadataTemplate | undefined> {
    const row = await this.db.get('SELECT * FROM metadata_templates WHERE ent_id = ? AND key = ?', [entId, key]) as { key: string; name: string; attributes: string } | undefined;
    return row ? { key: row.key, name: row.name, attributes: JSON.parse(row.attributes) as MetadataAttribute[] } : undefined;
  }

  async templates(entId: number): Promise<MetadataTemplate[]> {
    return mapInOrder((await this.db.all('SELECT key FROM metadata_templates WHERE ent_id = ? ORDER BY key', [entId]) as { key: string }[]), async (r) => (await this.template(entId, r.key))!);
  }

  /** Links a template to a library of the same enterprise (or unlinks it). */
  async link(libraryId: number, key: string, linked = true): Promise<void> {
    const lib = await this.db.get('SELECT ent_id FROM libraries WHERE id = ? AND deleted = 0', [libraryId]) as { ent_id: number } | undefined;
    if (!lib) throw new ServiceFault(FaultCode.LibraryMissing, `library ${libraryId} not found or deleted`);
    if (!await this.template(lib.ent_id, key)) throw badParam('key', "a metadata template of the library's enterprise", key);
    if (linked) await this.db.run('INSERT INTO library_metadata_templates (library_id, key) VALUES (?, ?) ON CONFLICT DO NOTHING', [libraryId, key]);
    else await this.db.run('DELETE FROM library_metadata_templates WHERE library_id = ? AND key = ?', [libraryId, key]);
  }

  /** The template `key` linked to a library; 403/40306 when it is not. */
  async linked(libraryId: number, entId: number, key: string): Promise<MetadataTemplate> {
    const t = await this.db.get('SELECT 1 FROM library_metadata_templates WHERE library_id = ? AND key = ?', [libraryId, key]) ? await this.template(entId, key) : undefined;
    if (!t) throw new ServiceFault(FaultCode.FeatureNotEnabled, `metadata template ${JSON.stringify(key)} is not linked to this library`);
    return t;
  }

  /** Sets the values of a template on an entry (replacing earlier ones); every value checked first. */
  async set(entryId: number, template: MetadataTemplate, metadata: Record<string, unknown>, display: string[]): Promise<Record<string, unknown>> {
    const values: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(metadata)) {
      const attr = template.attributes.find((a) => a.key === k);
      if (!attr) throw badParam('metadata', `attribute keys of template ${template.key} (${template.attributes.map((a) => a.key).join(', ')})`, k);
      values[k] = checkValue(attr, v);
    }
    for (const d of display) {
      if (!template.attributes.some((a) => a.key === d)) throw badParam('display', `attribute keys of template ${template.key}`, d);
    }
    await this.db.run(`INSERT INTO entry_metadata (entry_id, key, metadata, display) VALUES (?, ?, ?, ?)
      ON CONFLICT (entry_id, key) DO UPDATE SET metadata = excluded.metadata, display = excluded.display`, [entryId, template.key, JSON.stringify(values), display.join(',')]);
    return values;
  }

  /** Removes the values of a template from an entry; false when there were none. */
  async remove(entryId: number, key: string): Promise<boolean> {
    return (await this.db.run('DELETE FROM entry_metadata WHERE entry_id = ? AND key = ?', [entryId, key])).changes > 0;
  }

  /**
   * The attributes shown in file lists (`display` of `set_metadata`) of each of `entryIds` that has any:
   * entry id → template key → displayed attribute → value (one query per 500 entries).
   */
  async displayed(entryIds: readonly number[]): Promise<Map<number, Record<string, Record<string, unknown>>>> {
    const out = new Map<number, Record<string, Record<string, unknown>>>();
    for (let i = 0; i < entryIds.length; i += 500) {
      const some = entryIds.slice(i, i + 500);
      const rows = await this.db.all<{ entry_id: number; key: string; metadata: string; display: string }>(
        `SELECT entry_id, key, metadata, display FROM entry_metadata WHERE display <> '' AND entry_id IN (${some.map(() => '?').join(', ')}) ORDER BY key`, some);
      for (const r of rows) {
        const shown = shownValues(JSON.parse(r.metadata) as Record<string, unknown>, r.display);
        if (!shown) continue;
        const entry = out.get(r.entry_id) ?? {};
        entry[r.key] = shown;
        out.set(r.entry_id, entry);
      }
    }
    return out;
  }

  /** Values set on an entry, by template key. */
  async valuesOf(entryId: number): Promise<Record<string, { metadata: Record<string, unknown>; display: string[] }>> {
    const rows = await this.db.all('SELECT key, metadata, display FROM entry_metadata WHERE entry_id = ? ORDER BY key', [entryId]) as { key: string; metadata: string; display: string }[];
    return Object.fromEntries(rows.map((r) => [r.key, { metadata: JSON.parse(r.metadata) as Record<string, unknown>, display: r.display ? r.display.split(',') : [] }]));
  }
}

/** The values of the attributes a template's `display` names (comma-separated), or undefined when none is set. */
export function shownValues(values: Record<string, unknown>, display: string): Record<string, unknown> | undefined {
  if (display === '') return undefined;
  const shown = Object.fromEntries(display.split(',').filter((k) => k in values).map((k) => [k, values[k]]));
  return Object.keys(shown).length === 0 ? undefined : shown;
}
