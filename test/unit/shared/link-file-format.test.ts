/** The link file format shared by the mount and ctl: names, the target's limits, content both ways. */
import { describe, it, expect } from 'vitest';
import { LINK_TARGET_MAX, decodeLinkTarget, encodeLinkTarget, isLinkFileEntry, linkFileNameOf, linkNameOf, linkTargetProblem } from '../../../src/shared/link-file-format.js';

describe('link file format', () => {
  it('names: NAME.rclonelink holds the link NAME; the bare suffix holds none', () => {
    expect(linkFileNameOf('bin/tool')).toBe('bin/tool.rclonelink');
    expect(linkNameOf('tool.rclonelink')).toBe('tool');
    expect(linkNameOf('.rclonelink')).toBeUndefined();
    expect(linkNameOf('tool.txt')).toBeUndefined();
  });

  it('a link file is a file with the suffix small enough to hold a target', () => {
    expect(isLinkFileEntry({ name: 'a.rclonelink', size: 3, isDir: false })).toBe(true);
    expect(isLinkFileEntry({ name: 'a.rclonelink', size: 3, isDir: true })).toBe(false);
    expect(isLinkFileEntry({ name: 'a.rclonelink', size: LINK_TARGET_MAX + 1, isDir: false })).toBe(false);
  });

  it('a target round trips as UTF-8; empty and too long ones are refused both ways', () => {
    const target = '../päckage/bin/tool.js';
    expect(decodeLinkTarget(encodeLinkTarget(target))).toBe(target);
    expect(linkTargetProblem(target)).toBeUndefined();
    expect(linkTargetProblem('')).toBe('empty');
    expect(linkTargetProblem('é'.repeat(2048))).toBe('too-long'); // 4096 bytes
    expect(decodeLinkTarget(Buffer.alloc(0))).toBeUndefined();
    expect(decodeLinkTarget(Buffer.alloc(LINK_TARGET_MAX + 1, 97))).toBeUndefined();
  });
});
