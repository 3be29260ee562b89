import { defineConfig } from 'vitest/config';

/** The service's test files that are about one engine (they start what they need themselves). */
const ENGINE_TESTS = ['test/integration/service/postgres-schema.test.ts', 'test/integration/service/metadata-store.test.ts', 'test/integration/service/s3-blobs.test.ts', 'test/integration/service/pg-prepared.test.ts'];
/** The service's test files that need the metadata in PostgreSQL (several service processes on one database). */
const POSTGRESQL_ONLY_TESTS = ['test/integration/service/service-processes.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    // A test that asserts nothing fails: every test calls expect at least once.
    expect: { requireAssertions: true },
    hookTimeout: 60_000,
    pool: 'forks',
    teardownTimeout: 20_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'all',
          include: ['test/**/*.test.ts'],
          exclude: POSTGRESQL_ONLY_TESTS,
          // The tests run the TypeScript sources, also in the processes they start through bin/cloudlib.js
          // (which would otherwise run a build of dist/).
          env: { CLOUDLIB_RUN_FROM: 'source' },
        },
      },
      {
        // The service's suite a second time, with its metadata in PostgreSQL: one cluster for the run
        // (test/support/postgres-cluster.ts), a database per service.
        extends: true,
        test: {
          name: 'service-on-postgresql',
          include: ['test/integration/service/**/*.test.ts'],
          exclude: ENGINE_TESTS,
          env: { CLOUDLIB_RUN_FROM: 'source', CLOUDLIB_TEST_METADATA: 'postgresql' },
          globalSetup: ['test/support/postgres-cluster.ts'],
        },
      },
    ],
  },
});
