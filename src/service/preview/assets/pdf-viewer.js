/*
 * PDF documents, rendered page by page with pdf.js into one canvas. Previous/next buttons and the
 * keyboard (arrows, Page Up/Down, Home, End) turn pages; a page event is posted when the document has
 * loaded and on each page change. Browser code.
 */
import * as pdfjs from './pdfjs/pdf.mjs';
import { postViewerEvent } from './viewer-events.js';

pdfjs.GlobalWorkerOptions.workerSrc = new URL('./pdfjs/pdf.worker.mjs', import.meta.url).href;

const root = document.getElementById('pdf');
const canvas = document.getElementById('pdf-canvas');
const label = document.getElementById('page-label');
const prev = document.getElementById('prev');
const next = document.getElementById('next');
const failure = document.getElementById('pdf-error');

let doc;
let current = 1;
let rendering = Promise.resolve();

async function show(n) {
  if (!doc || n < 1 || n > doc.numPages || (n === current && canvas.dataset.page)) return;
  current = n;
  prev.disabled = current <= 1;
  next.disabled = current >= doc.numPages;
  label.textContent = `${current} / ${doc.numPages}`;
  postViewerEvent({ page: { current, total: doc.numPages } });
  rendering = rendering.then(() => draw(n)).catch(fail);
  await rendering;
}

async function draw(n) {
  if (n !== current) return;
  const page = await doc.getPage(n);
  const width = Math.max(320, root.clientWidth - 16);
  const base = page.getViewport({ scale: 1 });
  const scale = Math.min(width / base.width, 4);
  const viewport = page.getViewport({ scale: scale * (window.devicePixelRatio || 1) });
  canvas.width = Math.floor(viewport.width);
  canvas.height = Math.floor(viewport.height);
  canvas.style.width = `${Math.floor(viewport.width / (window.devicePixelRatio || 1))}px`;
  await page.render({ canvas, canvasContext: canvas.getContext('2d'), viewport }).promise;
  canvas.dataset.page = String(n);
}

function fail(e) {
  failure.hidden = false;
  failure.textContent = 'This PDF cannot be shown.';
  console.error(e);
}

prev.addEventListener('click', () => show(current - 1));
next.addEventListener('click', () => show(current + 1));
document.addEventListener('keydown', (e) => {
  if (!doc || e.altKey || e.ctrlKey || e.metaKey) return;
  const to = { ArrowLeft: current - 1, ArrowUp: current - 1, PageUp: current - 1, ArrowRight: current + 1, ArrowDown: current + 1, PageDown: current + 1, Home: 1, End: doc.numPages }[e.key];
  if (to === undefined) return;
  e.preventDefault();
  show(to);
});

try {
  doc = await pdfjs.getDocument({
    url: root.dataset.src,
    isEvalSupported: false,
    disableAutoFetch: true,
    standardFontDataUrl: new URL('./pdfjs/standard_fonts/', import.meta.url).href,
    cMapUrl: new URL('./pdfjs/cmaps/', import.meta.url).href,
    cMapPacked: true,
    wasmUrl: new URL('./pdfjs/wasm/', import.meta.url).href,
    iccUrl: new URL('./pdfjs/iccs/', import.meta.url).href,
  }).promise;
  current = 0;
  await show(1);
} catch (e) {
  label.textContent = '–';
  fail(e);
}
