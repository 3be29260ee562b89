/** Which viewer shows a file, and the MIME type its bytes are served with, decided by the file name's extension. */

export type PreviewKind = 'pdf' | 'image' | 'markdown' | 'text' | 'video' | 'audio' | 'other';

const IMAGE: Record<string, string> = {
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', avif: 'image/avif',
  bmp: 'image/bmp', ico: 'image/x-icon', svg: 'image/svg+xml',
};
const VIDEO: Record<string, string> = {
  mp4: 'video/mp4', m4v: 'video/mp4', mov: 'video/quicktime', webm: 'video/webm', ogv: 'video/ogg', mkv: 'video/x-matroska',
};
const AUDIO: Record<string, string> = {
  mp3: 'audio/mpeg', m4a: 'audio/mp4', aac: 'audio/aac', ogg: 'audio/ogg', oga: 'audio/ogg', opus: 'audio/ogg', wav: 'audio/wav',
  flac: 'audio/flac', weba: 'audio/webm',
};
const MARKDOWN = new Set(['md', 'markdown', 'mdown', 'mkd']);
const TEXT = new Set([
  'txt', 'text', 'log', 'csv', 'tsv', 'json', 'jsonl', 'ndjson', 'xml', 'yaml', 'yml', 'toml', 'ini', 'cfg', 'conf', 'env', 'properties',
  'sql', 'diff', 'patch', 'rst', 'tex', 'srt', 'vtt',
  'js', 'mjs', 'cjs', 'ts', 'mts', 'cts', 'jsx', 'tsx', 'css', 'scss', 'less', 'html', 'htm', 'vue', 'svelte',
  'py', 'rb', 'php', 'pl', 'lua', 'r', 'go', 'rs', 'c', 'h', 'cc', 'cpp', 'cxx', 'hpp', 'hh', 'm', 'mm', 'java', 'kt', 'kts', 'scala',
  'groovy', 'gradle', 'cs', 'fs', 'swift', 'dart', 'ex', 'exs', 'erl', 'hs', 'ml', 'clj', 'lisp', 'el', 'zig', 'nim', 'jl',
  'sh', 'bash', 'zsh', 'fish', 'ps1', 'bat', 'cmd', 'mk', 'cmake', 'proto', 'graphql', 'gql', 'tf', 'nix', 'dockerfile',
]);
/** Names without an extension that are text. */
const TEXT_NAMES = new Set(['makefile', 'dockerfile', 'readme', 'license', 'changelog', 'authors', 'notice', 'copying', 'gemfile', 'procfile']);

export function extensionOf(filename: string): string {
  const dot = filename.lastIndexOf('.');
  return dot > 0 ? filename.slice(dot + 1).toLowerCase() : '';
}

export function previewKind(filename: string): PreviewKind {
  const ext = extensionOf(filename);
  if (ext === 'pdf') return 'pdf';
  if (ext in IMAGE) return 'image';
  if (ext in VIDEO) return 'video';
  if (ext in AUDIO) return 'audio';
  if (MARKDOWN.has(ext)) return 'markdown';
  if (TEXT.has(ext) || (!ext && TEXT_NAMES.has(filename.toLowerCase()))) return 'text';
  return 'other';
}

/** The Content-Type of the file's bytes as the viewers fetch them (text is always served as plain text). */
export function contentType(filename: string): string {
  const ext = extensionOf(filename);
  if (ext === 'pdf') return 'application/pdf';
  const kind = previewKind(filename);
  if (kind === 'text' || kind === 'markdown') return 'text/plain; charset=utf-8';
  return IMAGE[ext] ?? VIDEO[ext] ?? AUDIO[ext] ?? 'application/octet-stream';
}

/** Raster images the thumbnailer decodes (not ico/bmp; not SVG, whose rendering could reach other files). */
export function thumbnailable(filename: string): boolean {
  return ['png', 'jpg', 'jpeg', 'gif', 'webp', 'avif'].includes(extensionOf(filename));
}
