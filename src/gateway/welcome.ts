/**
 * The file a new demo library starts with (`cloudlib up` on a fresh data folder, embedded service): it
 * says what the folder is and what to try, so the first look at the drive is not an empty folder.
 */
import type { GatewayVfs } from '../vfs/gateway-vfs.js';

export const WELCOME_NAME = 'Welcome.md';

export function welcomeText(library: string): string {
  return `# Welcome to cloudlib

This folder is **${library}**, the demo library of the service cloudlib runs for you. It is served
as a WebDAV drive and, where FUSE is usable, as a mounted folder.

- Put files here with any program: they are kept in a local journal at once and uploaded to the
  service in the background.
- \`cloudlib ctl status\` shows the libraries and the uploads still pending; \`cloudlib ctl flush\`
  waits for them.
- \`cloudlib ctl link create /${library}/${WELCOME_NAME}\` makes a share link to this file.

Delete this file whenever you like; it is not made again.
`;
}

/** Writes the welcome file into a library (uploaded like any other file). */
export async function writeWelcome(vfs: GatewayVfs, library: string): Promise<void> {
  await vfs.writeFile(`/${library}/${WELCOME_NAME}`, Buffer.from(welcomeText(library)));
}
