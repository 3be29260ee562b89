import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { requestedRange } from '../../../../src/service/preview/byte-ranges.js';
import { renderMarkdown } from '../../../../src/service/preview/markdown.js';
import { contentType, previewKind, thumbnailable } from '../../../../src/service/preview/preview-kind.js';
import { PreviewTokenSigner, type PreviewClaims } from '../../../../src/service/preview/preview-token.js';

const claims: PreviewClaims = {
  use: 'page', libraryId: 7, fullpath: 'a/b/ü & <x>.pdf', filehash: 'a'.repeat(40), filename: 'ü & <x>.pdf', filesize: 1234,
  watermark: 'Internal', memberName: 'Ann', expires: 2_000_000,
};

describe('PreviewTokenSigner', () => {
  const signer = new PreviewTokenSigner(randomBytes(32));

  it('round-trips the claims until the expiry', () => {
    const token = signer.sign(claims);
    expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(signer.verify(token, 'page', 1_999_999)).toEqual(claims);
    expect(signer.verify(token, 'page', 2_000_000)).toBe('expired');
  });

  it('refuses a token whose body or MAC was changed, another key, or another use', () => {
    const token = signer.sign(claims);
    const [body, mac] = token.split('.') as [string, string];
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(body, 'base64url').toString()), e: 9e12 })).toString('base64url');
    expect(signer.verify(`${forged}.${mac}`, 'page', 0)).toBe('invalid');
    const flip = (c: string): string => (c === 'A' ? 'B' : 'A');
    expect(signer.verify(`${body}.${mac.slice(0, -2)}${flip(mac.at(-2)!)}${mac.at(-1)!}`, 'page', 0)).toBe('invalid');
    // Same bytes once decoded, other spelling: the spare low bits of the last character.
    const last = mac.at(-1)!;
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const sibling = alphabet[alphabet.indexOf(last) ^ 1]!;
    expect(signer.verify(`${body}.${mac.slice(0, -1)}${sibling}`, 'page', 0)).toBe('invalid');
    expect(signer.verify(`${body}`, 'page', 0)).toBe('invalid');
    expect(new PreviewTokenSigner(randomBytes(32)).verify(token, 'page', 0)).toBe('invalid');
    expect(signer.verify(token, 'content', 0)).toBe('invalid');
  });

  it('refuses a signed body with malformed claims', () => {
    const bad = signer.sign({ ...claims, filehash: 'not-a-sha1' });
    expect(signer.verify(bad, 'page', 0)).toBe('invalid');
  });

  it('wants a key of at least 16 bytes', () => {
    expect(() => new PreviewTokenSigner(Buffer.alloc(8))).toThrow('expected at least 16 bytes, got 8');
  });
});

describe('requestedRange', () => {
  it.each([
    [undefined, 100, undefined],
    ['bytes=0-9', 100, { start: 0, end: 9 }],
    ['bytes=90-', 100, { start: 90, end: 99 }],
    ['bytes=50-500', 100, { start: 50, end: 99 }],
    ['bytes=-10', 100, { start: 90, end: 99 }],
    ['bytes=-500', 100, { start: 0, end: 99 }],
    ['bytes=100-', 100, 'unsatisfiable'],
    ['bytes=9-3', 100, 'unsatisfiable'],
    ['bytes=-0', 100, 'unsatisfiable'],
    ['bytes=0-', 0, 'unsatisfiable'],
    ['bytes=x-y', 100, 'unsatisfiable'],
    ['bytes=0-1,5-6', 100, undefined],
    ['items=0-1', 100, undefined],
  ])('%s of %i bytes', (header, size, want) => {
    expect(requestedRange(header, size)).toEqual(want);
  });
});

describe('previewKind', () => {
  it('tells the viewer by extension', () => {
    expect(['a.PDF', 'b.png', 'c.webm', 'd.mp3', 'e.md', 'f.ts', 'Makefile', 'g.docx', 'noext'].map(previewKind))
      .toEqual(['pdf', 'image', 'video', 'audio', 'markdown', 'text', 'text', 'other', 'other']);
    expect(contentType('x.html')).toBe('text/plain; charset=utf-8');
    expect(contentType('x.svg')).toBe('image/svg+xml');
    expect(contentType('x.bin')).toBe('application/octet-stream');
    expect(thumbnailable('x.jpg')).toBe(true);
    expect(thumbnailable('x.svg')).toBe(false);
  });
});

describe('renderMarkdown', () => {
  it('renders GFM tables: header, alignment, escaped pipes, inline markup; raw HTML in cells stays text', () => {
    const html = renderMarkdown('Figures:\n\n| Quarter | Revenue | Note |\n|:--|--:|:-:|\n| Q1 | 10 | **good** |\n| Q2 | 12 | a \\| b <b>x</b> |\n\nAfter.');
    expect(html).toContain('<table><thead><tr><th class="align-left">Quarter</th><th class="align-right">Revenue</th><th class="align-center">Note</th></tr></thead>');
    expect(html).toContain('<tr><td class="align-left">Q1</td><td class="align-right">10</td><td class="align-center"><strong>good</strong></td></tr>');
    expect(html).toContain('<td class="align-center">a | b &lt;b&gt;x&lt;/b&gt;</td>');
    expect(html).toContain('<p>After.</p>');
    // a table right after a paragraph line; no outer pipes; a row with fewer cells is padded
    expect(renderMarkdown('Text\na | b\n--- | ---\n1')).toBe('<p>Text</p>\n<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td></td></tr></tbody></table>');
    // not a table: the delimiter row does not match the header
    expect(renderMarkdown('a | b\n--- | --- | ---')).not.toContain('<table>');
  });

  it('renders headings, lists, emphasis, code and quotes', () => {
    const html = renderMarkdown('# Title\n\nSome *em* and **strong** and `a<b`.\n\n- one\n- two\n\n1. first\n2. second\n\n> quoted\n\n```\nx < y\n```\n\n---');
    expect(html).toContain('<h1>Title</h1>');
    expect(html).toContain('<p>Some <em>em</em> and <strong>strong</strong> and <code>a&lt;b</code>.</p>');
    expect(html).toContain('<ul><li>one</li><li>two</li></ul>');
    expect(html).toContain('<ol><li>first</li><li>second</li></ol>');
    expect(html).toContain('<blockquote><p>quoted</p></blockquote>');
    expect(html).toContain('<pre><code>x &lt; y</code></pre>');
    expect(html).toContain('<hr>');
  });

  it('shows raw HTML as text and drops unsafe link targets', () => {
    const html = renderMarkdown('<script>alert(1)</script> <img src=x onerror=alert(1)>\n\n[a](javascript:alert(1)) [b](JaVa\tScript:x) [c](https://ex.com/a_b_c?x=1&y=2) [d](data:text/html,x)');
    expect(html).not.toMatch(/<script|<img/);
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).not.toContain('javascript:');
    expect(html).not.toContain('href="data:');
    expect(html).toContain('<a href="https://ex.com/a_b_c?x=1&amp;y=2" rel="noopener noreferrer" target="_blank">c</a>');
  });

  it('keeps quotes in link targets inside the attribute', () => {
    const html = renderMarkdown('[x](https://e.com/"onmouseover="alert(1))');
    expect(html).not.toMatch(/href="[^"]*"\s*onmouseover/);
  });
});
