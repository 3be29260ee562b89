/**
 * The `$n` placeholders of a PostgreSQL statement, found outside quoted strings and identifiers and
 * each replaced by what the caller makes of its number: shifted (store/pg-combined-read.ts), or its
 * value as a literal (store/pg-metadata-store.ts `inlined`).
 */

/** `sql` with each `$n` outside quotes replaced by `replace(n)`. */
export function replacePlaceholders(sql: string, replace: (n: number) => string): string {
  let quote: string | undefined;
  let out = '';
  for (let i = 0; i < sql.length; i++) {
    const ch = sql[i]!;
    if (quote) {
      if (ch === quote) quote = undefined;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
    } else if (ch === '$' && isDigit(sql[i + 1])) {
      let j = i + 1;
      while (isDigit(sql[j])) j++;
      out += replace(Number(sql.slice(i + 1, j)));
      i = j - 1;
      continue;
    }
    out += ch;
  }
  return out;
}

const isDigit = (ch: string | undefined): boolean => ch !== undefined && ch >= '0' && ch <= '9';
