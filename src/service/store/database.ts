/**
 * Opens the service's SQLite database (mode 0600): WAL, foreign keys on, busy timeout, then the
 * migrations of schema.ts that have not run yet (each in its own transaction).
 */
import Database from 'better-sqlite3';
import { chmodSync, closeSync, openSync } from 'node:fs';
import { MIGRATIONS } from './schema.js';

export type Db = Database.Database;

export function openDatabase(file: string): Db {
  // Owner-only (0600), also a database of an earlier version; SQLite gives its -wal and -shm files the
  // database's mode when it creates them.
  if (file !== ':memory:') {
    closeSync(openSync(file, 'a', 0o600));
    chmodSync(file, 0o600);
  }
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  migrate(db);
  return db;
}

/** Applies the migrations after `PRAGMA user_version`; returns the version reached. */
export function migrate(db: Db): number {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > MIGRATIONS.length) {
    throw new Error(`database schema version ${current} is newer than this build knows (${MIGRATIONS.length}); upgrade cloudlib`);
  }
  for (let v = current; v < MIGRATIONS.length; v++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[v]!);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
  return MIGRATIONS.length;
}
