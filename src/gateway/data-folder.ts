/**
 * Where a gateway keeps its data (journal, caches, the embedded service, the control socket) when no
 * `--data` is given: one folder per user, found from any working folder, as rclone keeps its config and
 * cache under the user's home. `$CLOUDLIB_HOME` names it; else `$XDG_DATA_HOME/cloudlib`; else
 * `~/.local/share/cloudlib`.
 */
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';

export function defaultDataFolder(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string {
  if (env.CLOUDLIB_HOME) return resolve(cwd, env.CLOUDLIB_HOME);
  // XDG: a relative XDG_DATA_HOME is invalid and is ignored.
  if (env.XDG_DATA_HOME && isAbsolute(env.XDG_DATA_HOME)) return join(env.XDG_DATA_HOME, 'cloudlib');
  return join(env.HOME || homedir(), '.local', 'share', 'cloudlib');
}

/** The control socket of the gateway on a data folder. */
export function controlSocketOf(data: string): string {
  return join(data, 'control.sock');
}

/**
 * The control socket `ctl` talks to: `--socket`, else `$CLOUDLIB_SOCKET`, else the one of `--data`, else
 * that of the default data folder.
 */
export function defaultControlSocket(env: NodeJS.ProcessEnv = process.env, data?: string, cwd = process.cwd()): string {
  if (env.CLOUDLIB_SOCKET) return resolve(cwd, env.CLOUDLIB_SOCKET);
  return controlSocketOf(data !== undefined ? resolve(cwd, data) : defaultDataFolder(env, cwd));
}
