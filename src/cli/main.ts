/**
 * The `cloudlib` command. Each subcommand lives in its own module and is loaded on demand, so `--help`
 * and `ctl` start fast.
 */
import { parseArgs } from 'node:util';
import type { Subcommand } from './subcommand.js';

export type { Subcommand } from './subcommand.js';

/** Takes the declared options out of `args` (anywhere), leaves everything else in order. */
function splitDeclared(args: string[], options: Subcommand['options']): { values: Record<string, unknown>; positionals: string[] } {
  const values: Record<string, unknown> = {};
  const positionals: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--') {
      positionals.push(...args.slice(i));
      break;
    }
    const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
    const name = m?.[1];
    const def = name !== undefined ? options[name] : undefined;
    if (!m || !def) {
      positionals.push(a);
    } else if (def.type === 'boolean') {
      values[name!] = true;
    } else {
      const v = m[2] ?? args[++i];
      if (v === undefined) throw new Error(`option '--${name}' needs a value`);
      values[name!] = v;
    }
  }
  return { values, positionals };
}

/** One line each for `cloudlib --help` (the modules load on demand; their own help says more). */
const DESCRIPTIONS: Record<string, string> = {
  up: 'serve every library: WebDAV drive, FUSE mount, control socket, status page',
  service: 'the embedded service alone (the cloud file library API)',
  webdav: 'only a WebDAV drive of a configured service',
  ctl: 'talk to the running gateway: status, upload/download, links, members…',
  mount: 'only a FUSE mount of a configured service',
};

const SUBCOMMANDS: Record<string, () => Promise<Subcommand>> = {
  up: async () => (await import('./up.js')).upCommand,
  service: async () => (await import('./service.js')).serviceCommand,
  webdav: async () => (await import('./webdav.js')).webdavCommand,
  ctl: async () => (await import('./ctl.js')).ctlCommand,
  mount: async () => (await import('./mount.js')).mountCommand,
};

export function registerSubcommand(name: string, load: () => Promise<Subcommand>): void {
  SUBCOMMANDS[name] = load;
}

function mainHelp(): string {
  return [
    'cloudlib — every library of a cloud file library service as a drive',
    '',
    'Usage: cloudlib <command> [options]',
    '',
    'Commands:',
    ...Object.keys(SUBCOMMANDS).map((n) => (DESCRIPTIONS[n] ? `  ${n.padEnd(9)} ${DESCRIPTIONS[n]}` : `  ${n}`)),
    '',
    'Run `cloudlib <command> --help` for the options of a command.',
  ].join('\n');
}

export async function main(argv: string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    const lines = [mainHelp()];
    if (name === undefined) process.stdout.write(lines.join('\n') + '\n');
    else process.stdout.write(lines.join('\n') + '\n');
    return;
  }
  const load = SUBCOMMANDS[name];
  if (!load) {
    process.stderr.write(`cloudlib: unknown command '${name}'\n\n${mainHelp()}\n`);
    process.exitCode = 2;
    return;
  }
  const cmd = await load();
  let parsed;
  try {
    if (cmd.passThrough) {
      const help = rest[0] === '--help' || rest[0] === '-h' || rest.length === 0;
      parsed = help ? { values: { help: true }, positionals: [] } : splitDeclared(rest, cmd.options);
    } else parsed = parseArgs({ args: rest, options: { ...cmd.options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  } catch (err) {
    process.stderr.write(`cloudlib ${name}: ${(err as Error).message}\n\n${cmd.usage}\n`);
    process.exitCode = 2;
    return;
  }
  if (parsed.values.help) {
    process.stdout.write(`${cmd.summary}\n\n${cmd.usage}\n`);
    return;
  }
  const code = await cmd.run(parsed.values as Record<string, unknown>, parsed.positionals);
  if (typeof code === 'number') process.exitCode = code;
}
