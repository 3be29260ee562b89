/**
 * The HTML of the preview pages. Pure functions; every interpolated value is escaped. Pages carry no
 * inline script or style (the Content-Security-Policy forbids them): the viewers' scripts and the
 * stylesheet are files under `/preview/assets/`, addressed relative to the page at `/preview/v/<token>`.
 */
import { escapeHtml, formatSize } from '../links/link-html.js';
import { renderMarkdown } from './markdown.js';
import type { PreviewKind } from './preview-kind.js';

/** The policy of every page: scripts, styles, images, media and workers from this service only. */
export const PAGE_CSP = [
  "default-src 'none'", "script-src 'self' 'wasm-unsafe-eval'", "style-src 'self'", "img-src 'self' data: blob:", "media-src 'self'",
  "connect-src 'self'", "worker-src 'self'", "font-src 'self' data:", "base-uri 'none'", "form-action 'none'", 'frame-ancestors *',
].join('; ');

/** The policy of raw content: nothing runs even when a browser is sent to the address directly. */
export const CONTENT_CSP = "default-src 'none'; img-src 'self'; media-src 'self'; sandbox";

export interface PageView {
  kind: PreviewKind;
  filename: string;
  filesize: number;
  /** Address of the bytes for the viewer, relative to the page. */
  contentUrl: string;
  /** Address of the download, relative to the page; undefined when downloads are not offered. */
  downloadUrl?: string;
  /** Watermark lines; empty = none. */
  watermark: string[];
  /** For text and Markdown: the (possibly truncated) text. */
  text?: string;
  /** For text and Markdown: the text stops before the end of the file. */
  truncated?: boolean;
}

const ASSETS = '../assets';

export function renderPage(v: PageView): string {
  const toolbar = `<header class="bar"><span class="name" title="${escapeHtml(v.filename)}">${escapeHtml(v.filename)}</span>`
    + `<span class="size">${formatSize(v.filesize)}</span>${v.kind === 'pdf' ? PDF_NAV : ''}`
    + (v.downloadUrl ? `<a class="button" href="${escapeHtml(v.downloadUrl)}" download>Download</a>` : '')
    + '</header>';
  return shell(v.filename, `${toolbar}<main class="${v.kind}">${body(v)}</main>${watermark(v.watermark)}`, script(v.kind));
}

export function renderMessage(title: string, message: string): string {
  return shell(title, `<main class="message"><h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p></main>`, '');
}

const PDF_NAV = '<nav class="pages"><button type="button" id="prev" aria-label="Previous page" disabled>‹</button>'
  + '<span id="page-label" aria-live="polite">…</span>'
  + '<button type="button" id="next" aria-label="Next page" disabled>›</button></nav>';

function body(v: PageView): string {
  const src = escapeHtml(v.contentUrl);
  const more = v.truncated ? '<p class="note">Only the beginning of this file is shown.</p>' : '';
  switch (v.kind) {
    case 'pdf':
      return `<div id="pdf" data-src="${src}"><canvas id="pdf-canvas"></canvas><p id="pdf-error" class="note" hidden></p></div>`;
    case 'image':
      return `<img id="image" src="${src}" alt="${escapeHtml(v.filename)}">`;
    case 'text':
      return `<pre id="text">${escapeHtml(v.text ?? '')}</pre>${more}`;
    case 'markdown':
      return `<article id="markdown">${renderMarkdown(v.text ?? '')}</article>${more}`;
    case 'video':
      return `<video id="media" controls preload="metadata" src="${src}"></video>`;
    case 'audio':
      return `<audio id="media" controls preload="metadata" src="${src}"></audio>`;
    case 'other':
      return `<section class="file"><h1>${escapeHtml(v.filename)}</h1><p>${formatSize(v.filesize)}</p>`
        + `<p class="note">There is no preview for this kind of file.</p>`
        + (v.downloadUrl ? `<p><a class="button" href="${escapeHtml(v.downloadUrl)}" download>Download</a></p>` : '')
        + '</section>';
  }
}

function script(kind: PreviewKind): string {
  const file = { pdf: 'pdf-viewer.js', video: 'media-viewer.js', audio: 'media-viewer.js', image: 'document-viewer.js', text: 'document-viewer.js', markdown: 'document-viewer.js', other: '' }[kind];
  return file ? `<script type="module" src="${ASSETS}/${file}"></script>` : '';
}

/** The watermark: the lines repeated in a rotated grid over the whole page; it does not take clicks. */
function watermark(lines: string[]): string {
  if (!lines.length) return '';
  const tile = `<span>${lines.map(escapeHtml).join('<br>')}</span>`;
  return `<div class="watermark" aria-hidden="true">${tile.repeat(60)}</div>`;
}

function shell(title: string, content: string, scripts: string): string {
  return '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">'
    + `<meta name="robots" content="noindex"><meta name="referrer" content="no-referrer"><title>${escapeHtml(title)}</title>`
    + `<link rel="stylesheet" href="${ASSETS}/preview.css">${scripts}</head><body>${content}</body></html>\n`;
}
