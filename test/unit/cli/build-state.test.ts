/**
 * bin/cloudlib.js runs dist/ only while it was built from the sources as they are: a source changed,
 * added or removed after the build (or a changed tsconfig/package.json) makes it stale.
 */
import { mkdtemp, mkdir, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BUILD_INPUTS, buildState, sourcesSnapshot } from '../../../bin/build-state.js';

let root: string;
const T0 = new Date('2026-01-01T00:00:00Z');

async function recordBuild(): Promise<void> {
  await mkdir(join(root, 'dist'), { recursive: true });
  await writeFile(join(root, 'dist', 'build.json'), JSON.stringify({ sources: sourcesSnapshot(root) }));
}

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'cloudlib-build-'));
  await mkdir(join(root, 'src', 'cli'), { recursive: true });
  for (const f of ['src/cli/main.ts', 'src/cli/ctl.ts', ...BUILD_INPUTS]) {
    await writeFile(join(root, f), '{}');
    await utimes(join(root, f), T0, T0);
  }
});
afterEach(async () => rm(root, { recursive: true, force: true }));

describe('buildState', () => {
  it('absent without a build record, current right after a build', async () => {
    expect(buildState(root)).toEqual({ state: 'absent' });
    await recordBuild();
    expect(buildState(root)).toEqual({ state: 'current' });
  });

  it('stale when a source changes after the build', async () => {
    await recordBuild();
    await utimes(join(root, 'src/cli/ctl.ts'), new Date(T0.getTime() + 1000), new Date(T0.getTime() + 1000));
    expect(buildState(root)).toMatchObject({ state: 'stale', reason: expect.stringContaining('changed') });
  });

  it('stale when a source is added or removed', async () => {
    await recordBuild();
    await writeFile(join(root, 'src/cli/new.ts'), '');
    await utimes(join(root, 'src/cli/new.ts'), T0, T0);
    expect(buildState(root).state).toBe('stale');
    await rm(join(root, 'src/cli/new.ts'));
    expect(buildState(root).state).toBe('current');
    await rm(join(root, 'src/cli/ctl.ts'));
    expect(buildState(root)).toMatchObject({ state: 'stale', reason: expect.stringContaining('files') });
  });

  it('stale when the compiler settings change', async () => {
    await recordBuild();
    await utimes(join(root, 'tsconfig.build.json'), new Date(T0.getTime() + 1000), new Date(T0.getTime() + 1000));
    expect(buildState(root).state).toBe('stale');
  });
});
