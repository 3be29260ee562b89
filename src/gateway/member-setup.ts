/**
 * The gateway's part of members acting as themselves: which configuration asks for member sessions, the
 * application the token endpoint is asked as, the libraries a member's Vfs may serve (those the gateway
 * serves, with their feeds and library authorizations), and the WebDAV hook (member logins and
 * configured users acting as a member).
 */
import { join } from 'node:path';
import type { ClientSecretPair } from '../api/client.js';
import type { ServedLibrary } from '../remote/served-libraries.js';
import type { Logger } from '../shared/log.js';
import type { BandwidthLimit } from '../shared/bandwidth-limit.js';
import { VfsError, type Vfs } from '../vfs/types.js';
import { ConfigError, type GatewayConfig, type UserConfig } from './config.js';
import { MemberSessions } from './member-sessions.js';

const MIB = 1024 * 1024;

/** True when the configuration has anyone act as a member (member logins, a `member` user, `mount.member`). */
export function wantsMembers(config: GatewayConfig): boolean {
  return config.webdav.member_logins || config.webdav.users.some((u) => u.member !== undefined) || config.mount.member !== undefined;
}

/** The application of the embedded service's demo member, as its credentials.json names it. */
export function embeddedApplication(credentials: { member: { client_id?: string; client_secret: string } }): ClientSecretPair | undefined {
  const { client_id, client_secret } = credentials.member;
  return client_id ? { client_id, client_secret } : undefined;
}

export interface MemberSetupOptions {
  config: GatewayConfig;
  baseUrl: string;
  uploadHeaderPrefix: string;
  application: ClientSecretPair | undefined;
  /** The libraries the gateway serves (by library authorization): a member's Vfs serves those the member takes part in. */
  libraries: () => ServedLibrary[];
  logger: Logger;
  onExchange?: (e: { endpoint: string; status: number; ms: number }) => void;
  /** The gateway's bandwidth limit, shared by the members' transfers. */
  bandwidth?: BandwidthLimit;
}

export function startMemberSessions(opts: MemberSetupOptions): MemberSessions {
  const { config } = opts;
  if (!opts.application) {
    throw new ConfigError('member logins (webdav.member_logins, webdav.users[].member, mount.member) need the application the gateway asks the token endpoint as: give service.application.client_id and client_secret');
  }
  return new MemberSessions({
    baseUrl: opts.baseUrl,
    uploadHeaderPrefix: opts.uploadHeaderPrefix,
    application: opts.application,
    // The served set as it is now (a library added or removed at run time included).
    libraries: () => opts.libraries().map((l) => ({ name: l.name, id: l.id, feed: l.remote, client: l.client })),
    dataDir: join(config.data, 'members'),
    vfs: {
      feedIntervalMs: config.feed.interval_ms,
      maxFileBytes: config.journal.max_file_mb * MIB,
      durability: { mode: config.journal.durability, groupCommitMs: config.journal.group_commit_ms },
      // Each member's caches are their own, in memory only: the configured sizes shared out among the
      // sessions that may be open at once, so that all of them together stay within those bounds.
      cache: {
        metadataEntries: Math.max(1000, Math.floor(config.cache.metadata_entries / config.webdav.member_sessions)),
        metadataBytes: Math.max(MIB, Math.floor((64 * MIB) / config.webdav.member_sessions)),
        blockBytes: Math.max(MIB, Math.floor((config.cache.block_cache_mb * MIB) / config.webdav.member_sessions)),
        diskBytes: 0,
      },
      readAhead: { totalBytes: 32 * MIB },
    },
    maxSessions: config.webdav.member_sessions,
    idleMs: config.webdav.member_idle_s * 1000,
    checkIntervalMs: config.feed.interval_ms,
    onExchange: opts.onExchange,
    bandwidth: opts.bandwidth,
    logger: opts.logger,
  });
}

/** The WebDAV server's member hooks: logins of members, and configured users acting as a member. */
export function webdavMemberHooks(sessions: MemberSessions, config: GatewayConfig): {
  loginsOn: boolean;
  login(account: string, password: string, client: string): Promise<{ vfs: Vfs } | { refused: string }>;
  forUser(name: string): Promise<Vfs | undefined>;
} {
  const asMember = new Map<string, UserConfig>(config.webdav.users.filter((u) => u.member !== undefined).map((u) => [u.name, u]));
  return {
    loginsOn: config.webdav.member_logins,
    async login(account, password, client) {
      if (!config.webdav.member_logins) return { refused: 'member logins are off' };
      const out = await sessions.login(account, password, client);
      return 'session' in out ? { vfs: out.session.vfs } : out;
    },
    async forUser(name) {
      const u = asMember.get(name);
      if (!u) return undefined;
      const out = await sessions.login(u.member!, u.member_password!);
      if ('refused' in out) throw new VfsError('EACCES', `user '${name}' acts as member '${u.member}', whom the service refuses: ${out.refused}`);
      return out.session.vfs;
    },
  };
}
