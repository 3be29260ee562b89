/** The WebDAV front end: `createWebdavServer({ vfs, users, anonymous, keepJunkLocal, dataDir, logger })`. */
export { createWebdavServer, DEFAULT_CONNECTION_LIMITS, type ConnectionLimits, type WebdavServer, type WebdavServerOptions, type WebdavMetrics } from './server.js';
export type { WebdavUser, Principal, MemberLogins } from './auth.js';
