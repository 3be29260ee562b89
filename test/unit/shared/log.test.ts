/**
 * Log lines: JSON with every key once (a JSON reader keeps only one of a repeated key), or text for a
 * person on a terminal; secrets redacted in both.
 */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, logFormatFor, textLine } from '../../../src/shared/log.js';
import { startTestService } from '../../support/service.js';

/** The top-level keys of a JSON object text, in order, repeats included (JSON.parse keeps the last). */
export function topLevelKeys(text: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      if (depth === 1 && expectKey) keys.push(JSON.parse(text.slice(i, j + 1)) as string);
      expectKey = false;
      i = j;
    } else if (c === '{' || c === '[') {
      depth++;
      expectKey = depth === 1;
    } else if (c === '}' || c === ']') depth--;
    else if (c === ',' && depth === 1) expectKey = true;
  }
  return keys;
}

function memoryLog(): { lines: string[]; stream: Writable } {
  const lines: string[] = [];
  let buf = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      buf += chunk.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) !== -1) { lines.push(buf.slice(0, nl)); buf = buf.slice(nl + 1); }
      done();
    },
  });
  return { lines, stream };
}

describe('log lines', () => {
  it('topLevelKeys sees repeats and ignores nested keys and strings', () => {
    expect(topLevelKeys('{"a":1,"b":{"a":2},"c":"x\\",\\"a\\":","a":[{"b":1}]}')).toEqual(['a', 'b', 'c', 'a']);
  });

  it('the embedded service logs every key once, its parts named by one component', async () => {
    const { lines, stream } = memoryLog();
    const logger = createLogger({ level: 'trace', destination: stream });
    const svc = await startTestService({ logger });
    try {
      // refused upload requests log at debug level from the upload server
      const res = await fetch(`${svc.service.credentials.upload_server}/upload_part`, { method: 'PUT', body: 'x' });
      expect(res.status).toBeGreaterThanOrEqual(400);
      await res.arrayBuffer();
    } finally {
      await svc.close();
    }
    expect(lines.length).toBeGreaterThan(1);
    for (const line of lines) {
      const keys = topLevelKeys(line);
      expect(keys.filter((k, i) => keys.indexOf(k) !== i), line).toEqual([]);
    }
    const components = new Set(lines.map((l) => (JSON.parse(l) as { component?: string }).component));
    expect(components).toContain('service');
    expect(components).toContain('upload-server');
  });

  it('text lines for a person: time, level, fields, message; secrets stay redacted', () => {
    const { lines, stream } = memoryLog();
    createLogger({ level: 'info', destination: stream }).warn({ part: 'vfs', library: 'Demo Library', secret: 's3cret' }, 'feed poll failed');
    const line = textLine(lines[0]!);
    expect(line).toMatch(/^\d\d:\d\d:\d\d WARN {2}part=vfs library="Demo Library" secret=\[redacted\] feed poll failed\n$/);
    expect(line).not.toContain('s3cret');
    expect(textLine('not json')).toBe('not json');
  });

  it('an error in a text line: its message, the stack below (errors only), never JSON-escaped', () => {
    const { lines, stream } = memoryLog();
    const log = createLogger({ level: 'info', destination: stream });
    const err = new Error('upload failed: connection reset');
    log.warn({ part: 'vfs', err }, 'retrying');
    log.error({ part: 'vfs', err }, 'giving up');
    const warn = textLine(lines[0]!);
    expect(warn).toMatch(/^\d\d:\d\d:\d\d WARN {2}part=vfs err="upload failed: connection reset" retrying\n$/);
    const error = textLine(lines[1]!);
    const [first, ...stack] = error.trimEnd().split('\n');
    expect(first).toMatch(/ERROR part=vfs err="upload failed: connection reset" giving up$/);
    expect(stack.length).toBeGreaterThan(0);
    for (const l of stack) expect(l).toMatch(/^ {4}at /);
    expect(error).not.toContain('\\n');
  });

  it('JSON unless the logs go to a terminal; CLOUDLIB_LOG_FORMAT decides when set', () => {
    expect(logFormatFor(99_999, {})).toBe('json'); // not a terminal
    expect(logFormatFor(99_999, { CLOUDLIB_LOG_FORMAT: 'text' })).toBe('text');
    expect(logFormatFor(99_999, { CLOUDLIB_LOG_FORMAT: 'json' })).toBe('json');
  });
});
