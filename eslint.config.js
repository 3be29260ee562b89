import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { dirname, relative, resolve } from 'node:path';

/**
 * The house's import zones (docs/architecture.md): which folders of src/ a folder may import from. A
 * folder not listed is not checked yet. `only` narrows a zone to some files of it.
 */
const ZONES = {
  shared: [{ to: 'shared' }],
  service: [{ to: 'service' }, { to: 'shared' }],
  webdav: [{ to: 'webdav' }, { to: 'shared' }, { to: 'vfs', only: ['vfs/types.ts'] }],
  fuse: [{ to: 'fuse' }, { to: 'shared' }, { to: 'vfs', only: ['vfs/types.ts'] }],
  api: [{ to: 'api' }, { to: 'shared' }],
  vfs: [{ to: 'vfs' }, { to: 'shared' }],
  // The service-backed Remote adapter: it implements the Vfs's Remote over the client.
  remote: [{ to: 'remote' }, { to: 'api' }, { to: 'shared' }, { to: 'vfs' }],
  // The control socket: the client for the endpoint methods, and the Vfs only through its entry point's types.
  control: [{ to: 'control' }, { to: 'api' }, { to: 'shared' }, { to: 'vfs', only: ['vfs/index.ts', 'vfs/types.ts'] }],
};

const srcDir = resolve(import.meta.dirname, 'src');

/** Where an import of `source` from `file` lands, as a path below src/ ('' when outside it or not relative). */
function inSrc(file, source) {
  if (!source.startsWith('.')) return '';
  const target = relative(srcDir, resolve(dirname(file), source)).replace(/\.js$/, '.ts');
  return target.startsWith('..') ? '' : target;
}

const house = {
  rules: {
    'import-zones': {
      meta: { type: 'problem', schema: [] },
      create(context) {
        const file = relative(srcDir, context.filename);
        if (file.startsWith('..')) return {};
        const zone = ZONES[file.split('/')[0]];
        if (!zone) return {};
        const check = (node, source) => {
          if (typeof source !== 'string') return;
          const target = inSrc(context.filename, source);
          if (target === '') return;
          const folder = target.split('/')[0];
          const ok = zone.some((z) => z.to === folder && (!z.from || z.from.includes(file)) && (!z.only || z.only.includes(target)));
          if (!ok) context.report({ node, message: `src/${file.split('/')[0]}/ may not import src/${target} (import zones: docs/architecture.md)` });
        };
        return {
          ImportDeclaration: (node) => check(node, node.source.value),
          ExportNamedDeclaration: (node) => node.source && check(node, node.source.value),
          ExportAllDeclaration: (node) => check(node, node.source.value),
          ImportExpression: (node) => node.source.type === 'Literal' && check(node, node.source.value),
        };
      },
    },
  },
};

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'coverage/', '.cloudlib/', 'mnt/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', Buffer: 'readonly', console: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', URL: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', TextEncoder: 'readonly', TextDecoder: 'readonly', structuredClone: 'readonly', queueMicrotask: 'readonly', fetch: 'readonly', window: 'readonly', document: 'readonly' } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      'no-constant-condition': ['error', { checkLoops: false }],
      'no-empty': ['error', { allowEmptyCatch: true }],
    },
  },
  { files: ['src/**/*.ts'], plugins: { house }, rules: { 'house/import-zones': 'error' } },
);
