import { describe, expect, it } from 'vitest';
import { replacePlaceholders } from '../../../../src/service/store/pg-placeholders.js';
import { shifted } from '../../../../src/service/store/pg-combined-read.js';

describe('replacePlaceholders', () => {
  it('replaces each $n outside quoted strings and identifiers, whole numbers of any length', () => {
    const seen: number[] = [];
    const out = replacePlaceholders(`SELECT $1, '$2', "a$3", $12+$2 FROM t WHERE x = $3 AND y = 'it''s $4'`, (n) => {
      seen.push(n);
      return `<${n}>`;
    });
    expect(out).toBe(`SELECT <1>, '$2', "a$3", <12>+<2> FROM t WHERE x = <3> AND y = 'it''s $4'`);
    expect(seen).toEqual([1, 12, 2, 3]);
  });

  it('leaves a $ not followed by a digit, and a text without placeholders, as it is', () => {
    expect(replacePlaceholders('SELECT $$x$$, $a, $', () => 'no')).toBe('SELECT $$x$$, $a, $');
    expect(replacePlaceholders('', () => 'no')).toBe('');
  });

  it('is what shifted uses: placeholders moved up, quoted ones untouched', () => {
    expect(shifted("SELECT $1, '$1', $10 WHERE a = $2", 3)).toBe("SELECT $4, '$1', $13 WHERE a = $5");
  });
});
