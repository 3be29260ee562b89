/**
 * Which files of a tree a folder copy takes, with rclone's `--include` / `--exclude` glob rules: a
 * pattern without `/` matches a name at any depth (`*.log`); one with a `/` matches the path from the
 * top of the copy (`build/**`; a leading `/` changes nothing); `*` is any run of characters but `/`,
 * `**` any run including `/`, `?` one character but `/`, `[abc]` one of a set, `{a,b}` either. A path
 * is taken when no exclude matches it and, if includes are given, an include does. An excluded folder
 * (a pattern like `node_modules/**` or `node_modules`) is not walked at all.
 */
export class PathFilterError extends Error {}

function globToRegExp(pattern: string): RegExp {
  let re = '';
  let braces = 0;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') {
      if (pattern[i + 1] === '*') {
        i++;
        // `**/` also matches no folder at all (`a/**/b` matches `a/b`).
        if (pattern[i + 1] === '/') { i++; re += '(?:.*/)?'; } else re += '.*';
      } else re += '[^/]*';
    } else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 1);
      if (end === -1) throw new PathFilterError(`pattern '${pattern}': '[' without ']'`);
      const set = pattern.slice(i + 1, end).replace(/\\/g, '\\\\');
      re += `[${set.startsWith('!') ? '^' + set.slice(1) : set}]`;
      i = end;
    } else if (c === '{') { braces++; re += '(?:'; }
    else if (c === '}' && braces > 0) { braces--; re += ')'; }
    else if (c === ',' && braces > 0) re += '|';
    else if (c === '\\' && i + 1 < pattern.length) re += pattern[++i]!.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    else re += c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  if (braces > 0) throw new PathFilterError(`pattern '${pattern}': '{' without '}'`);
  return new RegExp(`^${re}$`);
}

interface Rule { re: RegExp; anchored: boolean }

function rule(pattern: string): Rule {
  const p = pattern.trim();
  if (!p) throw new PathFilterError('an empty pattern matches nothing: leave it out');
  const anchored = p.includes('/');
  return { re: globToRegExp(p.replace(/^\/+/, '').replace(/\/+$/, '')), anchored };
}

function matches(r: Rule, rel: string): boolean {
  if (r.anchored) return r.re.test(rel);
  const name = rel.slice(rel.lastIndexOf('/') + 1);
  return r.re.test(name);
}

export class PathFilter {
  private readonly includes: Rule[];
  private readonly excludes: Rule[];

  constructor(opts: { include?: string[]; exclude?: string[] } = {}) {
    this.includes = (opts.include ?? []).map(rule);
    this.excludes = (opts.exclude ?? []).map(rule);
  }

  get empty(): boolean {
    return this.includes.length === 0 && this.excludes.length === 0;
  }

  /** Whether the file at `rel` (relative to the top of the copy, `/`-separated) is taken. */
  takesFile(rel: string): boolean {
    if (this.excludes.some((r) => matches(r, rel))) return false;
    return this.includes.length === 0 || this.includes.some((r) => matches(r, rel));
  }

  /** Whether the folder at `rel` is walked: not when an exclude names it or everything below it. */
  walksFolder(rel: string): boolean {
    // Everything below: a path of names no pattern can spell, two levels down, is excluded too.
    return !this.excludes.some((r) => matches(r, rel) || (r.anchored && r.re.test(`${rel}/\0/\0`)));
  }
}

/** Patterns from a method parameter: a string (one pattern) or an array of strings. */
export function patternsOf(v: unknown, name: string): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v as string[];
  throw new PathFilterError(`parameter '${name}': expected a pattern or an array of patterns, got ${JSON.stringify(v)}`);
}
