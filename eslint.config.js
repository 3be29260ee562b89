import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { dirname, relative, resolve } from 'node:path';

/**
 * The house's import zones (docs/architecture.md): which folders of src/ a folder may import from. Every
 * folder of src/ has a zone (a folder without one is reported). `only` narrows a zone to some files of it.
 */
const ZONES = {
  shared: [{ to: 'shared' }],
  service: [{ to: 'service' }, { to: 'shared' }],
  webdav: [{ to: 'webdav' }, { to: 'shared' }, { to: 'vfs', only: ['vfs/types.ts'] }],
  // The FUSE front end, lessee of the engine lease (vfs/engine-lease.ts) besides the Vfs contract.
  fuse: [{ to: 'fuse' }, { to: 'shared' }, { to: 'vfs', only: ['vfs/types.ts', 'vfs/engine-lease.ts'] }],
  api: [{ to: 'api' }, { to: 'shared' }],
  vfs: [{ to: 'vfs' }, { to: 'shared' }],
  // The service-backed Remote adapter: it implements the Vfs's Remote over the client.
  remote: [{ to: 'remote' }, { to: 'api' }, { to: 'shared' }, { to: 'vfs' }],
  // The control socket: the client for the endpoint methods, and the Vfs only through its entry point's types.
  control: [{ to: 'control' }, { to: 'api' }, { to: 'shared' }, { to: 'vfs', only: ['vfs/index.ts', 'vfs/types.ts'] }],
  // What the commands assemble (`up` whole; the Vfs, members and control socket of `mount` and `webdav`): everything but the command line.
  gateway: ['gateway', 'shared', 'api', 'vfs', 'remote', 'service', 'webdav', 'fuse', 'control'].map((to) => ({ to })),
  // The command: anything.
  cli: ['cli', 'gateway', 'shared', 'api', 'vfs', 'remote', 'service', 'webdav', 'fuse', 'control'].map((to) => ({ to })),
};

/**
 * The engine lease: what the write-back lends the FUSE engine. Only the Vfs that grants it and its lessee
 * import it, whatever their zones allow: webdav/, control/ and the rest stay on the protocol-neutral contract.
 */
const LEASE = { file: 'vfs/engine-lease.ts', lessees: ['vfs', 'fuse'] };

/** The write-back, one owner of local durable state: the rest of src/ reaches it only through its entry. */
const PACKAGE_ENTRY = { folder: 'vfs/write-back', entry: 'vfs/write-back/index.ts' };

/** Test folders and the test folders they may not import from (a unit test stands on its own). */
const TEST_LAYERS = { unit: ['e2e'], integration: ['e2e'], support: ['e2e'] };

/** The waits a test may not write: fixed sleeps (a timer that only resolves a promise, the pause of wait-for.ts) and other wait helpers. */
const SLEEP = 'a fixed sleep in a test: wait for the event that proves the work is done with waitFor (test/support/wait-for.ts), or say why in an eslint-disable comment';
const WAITS = [
  ["CallExpression[callee.name='setTimeout'][arguments.0.type='Identifier']", SLEEP],
  ["CallExpression[callee.name='setTimeout'] > ArrowFunctionExpression.arguments:first-child[body.type='CallExpression'][body.callee.type='Identifier'][body.arguments.length=0]", SLEEP],
  ["CallExpression[callee.name='setTimeout'] > ArrowFunctionExpression.arguments:first-child > BlockStatement > ExpressionStatement > CallExpression[callee.type='Identifier'][arguments.length=0]", SLEEP],
  ["CallExpression[callee.name='setImmediate'][arguments.0.type='Identifier']", SLEEP],
  ["ImportDeclaration[source.value=/timers.promises$/]", SLEEP],
  ["CallExpression[callee.name='pause']", SLEEP],
  ["CallExpression[callee.object.name='vi'][callee.property.name=/^wait(For|Until)$/]", 'the tests have one wait: waitFor (test/support/wait-for.ts)'],
  ["CallExpression[callee.object.name='expect'][callee.property.name='poll']", 'the tests have one wait: waitFor (test/support/wait-for.ts)'],
].map(([selector, message]) => ({ selector, message }));

/** The time src/vfs/ may not read but through its Clock (src/vfs/clock.ts), so that a test can move it on. */
const CLOCKED = 'src/vfs/ reads time through its Clock (src/vfs/clock.ts: clock.now(), clock.after(), sleep()), taken at construction; a real time that must stay says why in an eslint-disable comment';
const CLOCK = [
  ["MemberExpression[object.name='Date'][property.name='now']", CLOCKED],
  ["NewExpression[callee.name='Date'][arguments.length=0]", CLOCKED],
  ["CallExpression[callee.name=/^set(Timeout|Interval)$/]", CLOCKED],
].map(([selector, message]) => ({ selector, message }));

const srcDir = resolve(import.meta.dirname, 'src');
const testDir = resolve(import.meta.dirname, 'test');

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
        if (!zone) {
          return { Program: (node) => context.report({ node, message: `src/${file.split('/')[0]}/ has no import zone (eslint.config.js, docs/architecture.md)` }) };
        }
        const check = (node, source) => {
          if (typeof source !== 'string') return;
          const target = inSrc(context.filename, source);
          if (target === '') return;
          const folder = target.split('/')[0];
          const ok = zone.some((z) => z.to === folder && (!z.from || z.from.includes(file)) && (!z.only || z.only.includes(target)));
          if (!ok) context.report({ node, message: `src/${file.split('/')[0]}/ may not import src/${target} (import zones: docs/architecture.md)` });
          else if (target === LEASE.file && !LEASE.lessees.includes(file.split('/')[0])) {
            context.report({ node, message: `src/${file.split('/')[0]}/ may not import src/${LEASE.file}: only the engine's lessee (src/fuse/) uses the lease (docs/architecture.md)` });
          } else if (target.startsWith(`${PACKAGE_ENTRY.folder}/`) && !file.startsWith(`${PACKAGE_ENTRY.folder}/`) && target !== PACKAGE_ENTRY.entry) {
            context.report({ node, message: `src/${target} is inside the write-back: import src/${PACKAGE_ENTRY.entry} (docs/architecture.md)` });
          }
        };
        return {
          ImportDeclaration: (node) => check(node, node.source.value),
          ExportNamedDeclaration: (node) => node.source && check(node, node.source.value),
          ExportAllDeclaration: (node) => check(node, node.source.value),
          ImportExpression: (node) => {
            // A computed specifier hides the edge from the type checker and from these zones.
            if (node.source.type === 'Literal') check(node, node.source.value);
            else if (node.source.type === 'TemplateLiteral' && node.source.expressions.length === 0) check(node, node.source.quasis[0].value.cooked);
            else context.report({ node, message: 'import() of a computed specifier: write the path literally (typed by typeof import(…)) so the type checker and the import zones see it' });
          },
          TSImportType: (node) => {
            const arg = node.argument;
            const value = arg?.type === 'TSLiteralType' ? arg.literal?.value : arg?.type === 'Literal' ? arg.value : undefined;
            check(node, value);
          },
        };
      },
    },
    'test-layers': {
      meta: { type: 'problem', schema: [] },
      create(context) {
        const file = relative(testDir, context.filename);
        if (file.startsWith('..')) return {};
        const layer = file.split('/')[0];
        const banned = TEST_LAYERS[layer] ?? [];
        const check = (node, source) => {
          if (typeof source !== 'string' || !source.startsWith('.')) return;
          const target = relative(testDir, resolve(dirname(context.filename), source));
          if (banned.includes(target.split('/')[0])) context.report({ node, message: `test/${layer}/ may not import test/${target.split('/')[0]}/ (move the helper to test/support/)` });
        };
        return {
          ImportDeclaration: (node) => check(node, node.source.value),
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
  { files: ['test/**/*.ts'], plugins: { house }, rules: { 'house/test-layers': 'error' } },
  {
    // A test waits for the event that proves the work is done (waitFor in test/support/wait-for.ts, which
    // fails with what it waited for), never for a fixed time. A pause that must let time pass says why in
    // its eslint-disable comment.
    files: ['test/**/*.ts'],
    ignores: ['test/support/wait-for.ts'],
    rules: {
      'no-restricted-syntax': ['error', ...WAITS],
    },
  },
  {
    // Time-dependent logic of src/vfs/ takes a Clock (the real one by default), which the tests replace.
    files: ['src/vfs/**/*.ts'],
    ignores: ['src/vfs/clock.ts'],
    rules: {
      'no-restricted-syntax': ['error', ...CLOCK],
    },
  },
);
