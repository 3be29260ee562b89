/**
 * PreviewAssets: the static files of the preview pages, served under `/preview/assets/`: the viewers'
 * scripts and stylesheet (this module's `assets/` folder) and pdf.js from the `pdfjs-dist` package
 * (`pdfjs/pdf.mjs`, `pdfjs/pdf.worker.mjs` and its font, CMap, colour-profile and WebAssembly folders).
 * Only these names resolve; nothing else on disk is reachable.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pipeline } from 'node:stream/promises';

const OWN = new Set(['preview.css', 'viewer-events.js', 'document-viewer.js', 'media-viewer.js', 'pdf-viewer.js']);
const PDFJS_DIRS = new Set(['standard_fonts', 'cmaps', 'iccs', 'wasm']);
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$/;

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.wasm': 'application/wasm', '.ttf': 'font/ttf',
};

export class PreviewAssets {
  private readonly ownDir = fileURLToPath(new URL('./assets/', import.meta.url));
  private readonly pdfjsDir = dirname(createRequire(import.meta.url).resolve('pdfjs-dist/package.json'));

  /** The file behind an asset name (the part after `/assets/`), or undefined when there is none. */
  resolve(name: string): string | undefined {
    if (OWN.has(name)) return join(this.ownDir, name);
    if (name === 'pdfjs/pdf.mjs') return join(this.pdfjsDir, 'build', 'pdf.min.mjs');
    if (name === 'pdfjs/pdf.worker.mjs') return join(this.pdfjsDir, 'build', 'pdf.worker.min.mjs');
    const m = /^pdfjs\/([a-z_]+)\/([^/]+)$/.exec(name);
    if (m && PDFJS_DIRS.has(m[1]!) && NAME.test(m[2]!) && !m[2]!.includes('..')) return join(this.pdfjsDir, m[1]!, m[2]!);
    return undefined;
  }

  async handle(req: IncomingMessage, res: ServerResponse, name: string): Promise<void> {
    const file = this.resolve(name);
    const info = file ? await stat(file).catch(() => undefined) : undefined;
    if (!file || !info?.isFile()) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found');
      return;
    }
    res.writeHead(200, {
      'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
      'content-length': String(info.size),
      'cache-control': 'public, max-age=3600',
      'x-content-type-options': 'nosniff',
      'cross-origin-resource-policy': 'same-origin',
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    await pipeline(createReadStream(file), res);
  }
}
