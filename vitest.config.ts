import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // The tests run the TypeScript sources, also in the processes they start through bin/cloudlib.js
    // (which would otherwise run a build of dist/).
    env: { CLOUDLIB_RUN_FROM: 'source' },
    teardownTimeout: 20_000,
  },
});
