/**
 * A small, safe Markdown renderer for previews: headings, paragraphs, emphasis, inline code, fenced
 * and indented code blocks, block quotes, lists, horizontal rules, links and GFM tables (a header row,
 * a delimiter row of `---` cells with `:` for alignment, then rows until a blank line). Every piece of source
 * text is HTML-escaped before any markup is added, so raw HTML in the document shows as text; links
 * keep only http, https, mailto and relative targets. Images become links (the page loads nothing
 * from elsewhere).
 */
import { escapeHtml } from '../links/link-html.js';

export function renderMarkdown(src: string): string {
  const lines = src.replace(/\r\n?/g, '\n').split('\n');
  const out: string[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    const fence = /^ {0,3}(`{3,}|~{3,})(.*)$/.exec(line);
    if (fence) {
      const marker = fence[1]!;
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i]!.trimStart().startsWith(marker)) body.push(lines[i++]!);
      i++;
      out.push(`<pre><code>${escapeHtml(body.join('\n'))}</code></pre>`);
      continue;
    }
    if (/^\s*$/.test(line)) { i++; continue; }
    const heading = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const n = heading[1]!.length;
      out.push(`<h${n}>${inline(heading[2]!)}</h${n}>`);
      i++;
      continue;
    }
    if (/^ {0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) { out.push('<hr>'); i++; continue; }
    if (/^( {4}|\t)/.test(line)) {
      const body: string[] = [];
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]!) || (/^\s*$/.test(lines[i]!) && /^( {4}|\t)/.test(lines[i + 1] ?? '')))) {
        body.push(lines[i++]!.replace(/^( {4}|\t)/, ''));
      }
      out.push(`<pre><code>${escapeHtml(body.join('\n'))}</code></pre>`);
      continue;
    }
    if (/^ {0,3}>/.test(line)) {
      const body: string[] = [];
      while (i < lines.length && /^ {0,3}>/.test(lines[i]!)) body.push(lines[i++]!.replace(/^ {0,3}> ?/, ''));
      out.push(`<blockquote>${renderMarkdown(body.join('\n'))}</blockquote>`);
      continue;
    }
    const aligns = tableAt(lines, i);
    if (aligns) {
      const row = (cells: string[], tag: 'th' | 'td') => `<tr>${aligns.map((a, k) => `<${tag}${a ? ` class="align-${a}"` : ''}>${inline(cells[k] ?? '')}</${tag}>`).join('')}</tr>`;
      const head = row(tableCells(lines[i]!), 'th');
      i += 2;
      const body: string[] = [];
      while (i < lines.length && !/^\s*$/.test(lines[i]!) && !startsBlock(lines[i]!)) body.push(row(tableCells(lines[i++]!), 'td'));
      out.push(`<table><thead>${head}</thead>${body.length ? `<tbody>${body.join('')}</tbody>` : ''}</table>`);
      continue;
    }
    const item = listItem(line);
    if (item) {
      const tag = item.ordered ? 'ol' : 'ul';
      const items: string[] = [];
      while (i < lines.length) {
        const it = listItem(lines[i]!);
        if (it && it.ordered === item.ordered) { items.push(it.text); i++; continue; }
        // a continuation line of the previous item
        if (items.length && /^\s{2,}\S/.test(lines[i]!)) { items[items.length - 1] += ` ${lines[i++]!.trim()}`; continue; }
        break;
      }
      out.push(`<${tag}>${items.map((t) => `<li>${inline(t)}</li>`).join('')}</${tag}>`);
      continue;
    }
    const para: string[] = [];
    while (i < lines.length && !/^\s*$/.test(lines[i]!) && !startsBlock(lines[i]!) && !(para.length && tableAt(lines, i))) para.push(lines[i++]!.trim());
    if (!para.length) para.push(lines[i++]!.trim());
    out.push(`<p>${inline(para.join('\n'))}</p>`);
  }
  return out.join('\n');
}

/** The cells of a table row: split on `|` (not on an escaped one), the outer pipes optional, `\|` kept as `|`. */
function tableCells(line: string): string[] {
  let t = line.trim();
  if (t.startsWith('|')) t = t.slice(1);
  if (t.endsWith('|') && !t.endsWith('\\|')) t = t.slice(0, -1);
  return t.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, '|'));
}

const DELIMITER_CELL = /^:?-+:?$/;

/**
 * When lines[i] starts a GFM table (a row with a pipe, then a delimiter row with as many cells), the
 * alignment of each column ('' for none); else undefined.
 */
function tableAt(lines: string[], i: number): ('' | 'left' | 'center' | 'right')[] | undefined {
  const head = lines[i]!;
  const delim = lines[i + 1];
  if (delim === undefined || !head.includes('|') || !delim.includes('-')) return undefined;
  const cells = tableCells(delim);
  if (!cells.every((c) => DELIMITER_CELL.test(c)) || cells.length !== tableCells(head).length) return undefined;
  return cells.map((c) => (c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : c.startsWith(':') ? 'left' : ''));
}

function listItem(line: string): { ordered: boolean; text: string } | undefined {
  const m = /^ {0,3}(?:([-*+])|(\d{1,9})[.)])\s+(.*)$/.exec(line);
  return m ? { ordered: m[2] !== undefined, text: m[3]! } : undefined;
}

function startsBlock(line: string): boolean {
  return /^ {0,3}(#{1,6}\s|>|`{3,}|~{3,})/.test(line) || listItem(line) !== undefined || /^ {0,3}([-*_])(\s*\1){2,}\s*$/.test(line);
}

/** Inline markup of escaped text: code spans first (their content stays literal), then links, emphasis, breaks. */
function inline(src: string): string {
  const parts = src.split(/(`+)([\s\S]*?)\1/);
  // split with two groups: [text, ticks, code, text, ticks, code, ..., text]
  let html = '';
  for (let k = 0; k < parts.length; k += 3) {
    html += spans(parts[k]!);
    if (k + 2 < parts.length) html += `<code>${escapeHtml(parts[k + 2]!.trim())}</code>`;
  }
  return html;
}

function spans(text: string): string {
  // links become placeholders first, so emphasis never rewrites a link target
  const links: string[] = [];
  let s = escapeHtml(text.replace(/\uE000/g, '')).replace(/!?\[([^\]]*)\]\(([^)\s]+)(?:\s+&quot;[^&]*&quot;)?\)/g, (_all, label: string, href: string) => {
    const target = safeHref(href);
    links.push(target === undefined ? label : `<a href="${target}" rel="noopener noreferrer" target="_blank">${label || target}</a>`);
    return `\uE000${links.length - 1}\uE000`;
  });
  s = s.replace(/(\*\*|__)(?=\S)([\s\S]*?\S)\1/g, '<strong>$2</strong>');
  s = s.replace(/(\*|_)(?=\S)([\s\S]*?\S)\1/g, '<em>$2</em>');
  s = s.replace(/~~(?=\S)([\s\S]*?\S)~~/g, '<del>$1</del>');
  s = s.replace(/ {2,}\n/g, '<br>\n');
  return s.replace(/\uE000(\d+)\uE000/g, (_all, n: string) => links[Number(n)]!);
}

/** An escaped link target kept when its scheme is http, https or mailto, or it has none (relative). */
function safeHref(escaped: string): string | undefined {
  const raw = escaped.replace(/&amp;/g, '&');
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(raw.replace(/[\s\p{Cc}]/gu, ''));
  if (scheme && !['http', 'https', 'mailto'].includes(scheme[1]!.toLowerCase())) return undefined;
  return escaped;
}
