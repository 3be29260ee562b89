/** What a `cloudlib` subcommand is: main.ts dispatches to them, each file defines one. */
import type { ParseArgsConfig } from 'node:util';

export interface Subcommand {
  summary: string;
  usage: string;
  options: NonNullable<ParseArgsConfig['options']>;
  run(values: Record<string, unknown>, positionals: string[]): Promise<number | void>;
  /**
   * The command parses its own arguments after its `options` (verbs with options of their own, like
   * `ctl link create PATH --expires 7d`): the declared options are taken wherever they appear, every
   * other argument is passed on as a positional.
   */
  passThrough?: boolean;
}
