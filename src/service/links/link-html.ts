/** The HTML of the share-link pages. Pure functions; every interpolated value is escaped. */
import type { LinkEntry } from './types.js';

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

const STYLE = 'body{font-family:system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#222}'
  + 'table{border-collapse:collapse;width:100%}td{padding:.3rem .5rem;border-bottom:1px solid #ddd}'
  + 'a.button,button{display:inline-block;padding:.4rem .9rem;border:1px solid #357;border-radius:4px;background:#468;color:#fff;text-decoration:none}'
  + '.muted{color:#777}.wm{color:#999;font-size:.8rem}';

function page(title: string, body: string): string {
  return `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">`
    + `<meta name="robots" content="noindex"><title>${escapeHtml(title)}</title><style>${STYLE}</style></head>`
    + `<body>${body}</body></html>\n`;
}

export function formatSize(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

function when(sec: number): string {
  return new Date(sec * 1000).toISOString().slice(0, 16).replace('T', ' ');
}

export function renderMessage(title: string, message: string): string {
  return page(title, `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>`);
}

export function renderPassword(action: string, wrong: boolean): string {
  return page('Password required', `<h1>Password required</h1>${wrong ? '<p class="muted">Wrong password, try again.</p>' : ''}`
    + `<form method="post" action="${escapeHtml(action)}"><input type="password" name="password" autofocus required aria-label="Password"> `
    + '<button type="submit">Open</button></form>');
}

export function renderFile(entry: LinkEntry, base: string, canDownload: boolean, wm: string): string {
  return page(entry.filename, `<h1>${escapeHtml(entry.filename)}</h1>`
    + `<p>${formatSize(entry.filesize)} · modified ${when(entry.lastDateline)} UTC</p>`
    + (canDownload ? `<p><a class="button" href="${escapeHtml(`${base}/download`)}" download>Download</a></p>` : '<p class="muted">Viewing only: downloads are not allowed by this link.</p>')
    + (wm ? `<p class="wm">${escapeHtml(wm)}</p>` : ''));
}

export interface FolderView {
  root: LinkEntry;
  folder: LinkEntry;
  /** Path of `folder` below the linked folder ('' = the linked folder itself). */
  sub: string;
  children: LinkEntry[];
  base: string;
  canDownload: boolean;
  canUpload: boolean;
}

export function renderFolder(v: FolderView): string {
  const rel = (name: string) => (v.sub ? `${v.sub}/${name}` : name);
  const q = (p: string) => `?path=${encodeURIComponent(p)}`;
  const rows = [...v.children].sort((a, b) => Number(b.dir) - Number(a.dir) || a.filename.localeCompare(b.filename)).map((c) => {
    const name = escapeHtml(c.filename);
    if (c.dir) return `<tr><td><a href="${escapeHtml(v.base + q(rel(c.filename)))}">${name}/</a></td><td></td><td></td></tr>`;
    const dl = v.canDownload ? `<a href="${escapeHtml(`${v.base}/download${q(rel(c.filename))}`)}" download>Download</a>` : '';
    return `<tr><td>${name}</td><td>${formatSize(c.filesize)}</td><td>${dl}</td></tr>`;
  });
  const parent = v.sub ? `<p><a href="${escapeHtml(v.sub.includes('/') ? v.base + q(v.sub.slice(0, v.sub.lastIndexOf('/'))) : v.base)}">↑ Up</a></p>` : '';
  const upload = v.canUpload
    ? `<form method="post" enctype="multipart/form-data" action="${escapeHtml(`${v.base}/upload`)}"><input type="hidden" name="path" value="${escapeHtml(v.sub)}">`
      + '<input type="file" name="file" required aria-label="File"> <button type="submit">Upload</button></form>'
    : '';
  const title = v.root.filename || 'Shared folder';
  return page(title, `<h1>${escapeHtml(title)}${v.sub ? ` / ${escapeHtml(v.sub)}` : ''}</h1>${parent}`
    + (rows.length ? `<table>${rows.join('')}</table>` : '<p class="muted">This folder is empty.</p>') + upload);
}
