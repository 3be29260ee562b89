import { describe, expect, it } from 'vitest';
import { ForegroundActivity } from '../../../src/vfs/foreground-activity.js';

describe('ForegroundActivity', () => {
  it('is busy for windowMs after the last request, and not before any', () => {
    const f = new ForegroundActivity(100);
    expect(f.busy(1000)).toBe(false);
    f.touch(1000);
    expect(f.busy(1000)).toBe(true);
    expect(f.busy(1099)).toBe(true);
    expect(f.busy(1100)).toBe(false);
    f.touch(1050);
    expect(f.busy(1149)).toBe(true);
    expect(f.touches).toBe(2);
  });

  it('refuses a window that is not a number of milliseconds', () => {
    expect(() => new ForegroundActivity(-1)).toThrow(/windowMs/);
    expect(() => new ForegroundActivity(Number.NaN)).toThrow(/windowMs/);
  });
});
