/** The HTML page a browser gets for a folder: name, size, modified, with download links. */
import type { Attr } from '../vfs/types.js';
import { hrefOf, parentPath } from './paths.js';

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function sizeText(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

export function folderPage(folder: string, entries: Attr[]): string {
  const sorted = [...entries].sort((a, b) => (a.isDir === b.isDir ? a.name.localeCompare(b.name) : a.isDir ? -1 : 1));
  const rows = sorted.map((e) => {
    const href = escapeHtml(hrefOf(e.path, e.isDir));
    const modified = new Date(e.mtimeMs).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
    return `<tr><td><a href="${href}">${escapeHtml(e.name)}${e.isDir ? '/' : ''}</a></td><td class="n">${e.isDir ? '' : sizeText(e.size)}</td><td>${modified}</td>` +
      `<td>${e.isDir ? '' : `<a href="${href}" download>download</a>`}</td></tr>`;
  });
  const up = folder === '/' ? '' : `<tr><td><a href="${escapeHtml(hrefOf(parentPath(folder), true))}">../</a></td><td></td><td></td><td></td></tr>`;
  const title = escapeHtml(folder);
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${title}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;width:100%}td,th{padding:.35em .8em;text-align:left;border-bottom:1px solid #eee}.n{text-align:right;white-space:nowrap}a{text-decoration:none;color:#0645ad}</style>
</head><body><h1>${title}</h1>
<table><thead><tr><th>Name</th><th class="n">Size</th><th>Modified</th><th></th></tr></thead><tbody>
${up}${rows.join('\n')}
</tbody></table></body></html>
`;
}
