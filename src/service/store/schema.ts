/**
 * The service's SQLite schema as versioned migrations. A migration runs once, in its own transaction;
 * `PRAGMA user_version` records the last one applied. Never edit a released migration: add one, here and
 * in PostgreSQL's dialect in pg-schema.ts (a test compares the two schemas' tables and columns).
 *
 * Triggers keep the derived counters exact whatever code path changes a row:
 * - `blobs.refs`: references to a blob from current file content (present or in the recycle bin) and
 *   from file events that keep it (history versions);
 * - `libraries.size_used` / `size_recycle` / `file_count` / `dir_count`.
 */
export const MIGRATIONS: readonly string[] = [
  // 1: enterprise directory, file tree, events, blobs, pending uploads, copy queue.
  `
  CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);

  CREATE TABLE partners (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    client_id TEXT NOT NULL UNIQUE,
    client_secret TEXT NOT NULL
  );

  CREATE TABLE enterprises (
    id INTEGER PRIMARY KEY,
    partner_id INTEGER REFERENCES partners(id),
    out_id TEXT,
    name TEXT NOT NULL,
    client_id TEXT NOT NULL UNIQUE,
    client_secret TEXT NOT NULL,
    trial INTEGER NOT NULL DEFAULT 1,
    end_dateline INTEGER NOT NULL DEFAULT 0,
    member_limit INTEGER NOT NULL DEFAULT 1000,
    space INTEGER NOT NULL DEFAULT -1,
    created_ms INTEGER NOT NULL
  );
  CREATE UNIQUE INDEX enterprises_out_id ON enterprises(partner_id, out_id) WHERE out_id IS NOT NULL;

  CREATE TABLE members (
    id INTEGER PRIMARY KEY,
    ent_id INTEGER NOT NULL REFERENCES enterprises(id),
    out_id TEXT,
    account TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    email TEXT NOT NULL DEFAULT '',
    phone TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL DEFAULT '',
    state INTEGER NOT NULL DEFAULT 1,
    password_md5 TEXT,
    created_ms INTEGER NOT NULL
  );

  CREATE TABLE applications (
    client_id TEXT PRIMARY KEY,
    client_secret TEXT NOT NULL,
    title TEXT NOT NULL
  );

  CREATE TABLE access_tokens (
    token TEXT PRIMARY KEY,
    member_id INTEGER NOT NULL REFERENCES members(id) ON DELETE CASCADE,
    client_id TEXT NOT NULL REFERENCES applications(client_id) ON DELETE CASCADE,
    refresh_token TEXT UNIQUE,
    expires_ms INTEGER NOT NULL
  );

  CREATE TABLE libraries (
    id INTEGER PRIMARY KEY,
    mount_id INTEGER NOT NULL UNIQUE,
    ent_id INTEGER NOT NULL REFERENCES enterprises(id),
    name TEXT NOT NULL,
    logo_url TEXT NOT NULL DEFAULT '',
    out_id TEXT,
    type INTEGER NOT NULL DEFAULT 1,
    owner_id INTEGER NOT NULL DEFAULT 0,
    capacity INTEGER NOT NULL DEFAULT -1,
    size_used INTEGER NOT NULL DEFAULT 0,
    size_recycle INTEGER NOT NULL DEFAULT 0,
    file_count INTEGER NOT NULL DEFAULT 0,
    dir_count INTEGER NOT NULL DEFAULT 0,
    last_op_ms INTEGER NOT NULL DEFAULT 0,
    deleted INTEGER NOT NULL DEFAULT 0,
    created_ms INTEGER NOT NULL
  );

  CREATE TABLE library_members (
    library_id INTEGER NOT NULL REFERENCES libraries(id) ON DELETE CASCADE,
    member_id INTEGER NOT NULL REFERENCES members(id) ON DELETE CASCADE,
    role_id INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (library_id, member_id)
  );

  CREATE TABLE library_auths (
    org_client_id TEXT PRIMARY KEY,
    org_client_secret TEXT NOT NULL,
    library_id INTEGER NOT NULL REFERENCES libraries(id) ON DELETE CASCADE,
    ent_client_id TEXT NOT NULL,
    title TEXT NOT NULL,
    created_ms INTEGER NOT NULL
  );
  CREATE UNIQUE INDEX library_auths_once ON library_auths(library_id, ent_client_id);

  CREATE TABLE blobs (
    sha1 TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    refs INTEGER NOT NULL DEFAULT 0,
    created_ms INTEGER NOT NULL
  );
  CREATE INDEX blobs_unreferenced ON blobs(refs) WHERE refs = 0;

  -- state: 0 present, 1 in the recycle bin, 2 removed for good (kept as a tombstone for the updates feed).
  CREATE TABLE entries (
    id INTEGER PRIMARY KEY,
    library_id INTEGER NOT NULL REFERENCES libraries(id) ON DELETE CASCADE,
    hash TEXT NOT NULL UNIQUE,
    parent_id INTEGER REFERENCES entries(id),
    fullpath TEXT NOT NULL,
    name TEXT NOT NULL,
    dir INTEGER NOT NULL,
    filehash TEXT NOT NULL DEFAULT '',
    filesize INTEGER NOT NULL DEFAULT 0,
    create_member_id INTEGER NOT NULL DEFAULT 0,
    create_member_name TEXT NOT NULL DEFAULT '',
    create_ms INTEGER NOT NULL,
    last_member_id INTEGER NOT NULL DEFAULT 0,
    last_member_name TEXT NOT NULL DEFAULT '',
    last_ms INTEGER NOT NULL,
    op_ms INTEGER NOT NULL,
    state INTEGER NOT NULL DEFAULT 0,
    tags TEXT NOT NULL DEFAULT '',
    lock_member_id INTEGER,
    lock_member_name TEXT,
    recycle_root INTEGER,
    recycled_ms INTEGER,
    recycled_by TEXT
  );
  CREATE UNIQUE INDEX entries_path ON entries(library_id, fullpath) WHERE state = 0;
  CREATE INDEX entries_children ON entries(parent_id, state, dir DESC, name);
  CREATE INDEX entries_root_children ON entries(library_id, state, dir DESC, name) WHERE parent_id IS NULL;
  CREATE INDEX entries_feed ON entries(library_id, op_ms);
  CREATE INDEX entries_recycle ON entries(library_id, recycled_ms) WHERE state = 1 AND recycle_root = id;
  CREATE INDEX entries_filehash ON entries(filehash) WHERE filehash <> '';

  CREATE TABLE file_events (
    id INTEGER PRIMARY KEY,
    library_id INTEGER NOT NULL REFERENCES libraries(id) ON DELETE CASCADE,
    entry_id INTEGER REFERENCES entries(id),
    hash TEXT NOT NULL DEFAULT '',
    act INTEGER NOT NULL,
    dir INTEGER NOT NULL DEFAULT 0,
    fullpath TEXT NOT NULL,
    filehash TEXT NOT NULL DEFAULT '',
    filesize INTEGER NOT NULL DEFAULT 0,
    member_id INTEGER NOT NULL DEFAULT 0,
    member_name TEXT NOT NULL DEFAULT '',
    ms INTEGER NOT NULL,
    property TEXT NOT NULL DEFAULT '{}',
    keeps_blob INTEGER NOT NULL DEFAULT 0
  );
  CREATE INDEX file_events_entry ON file_events(entry_id, id);
  CREATE INDEX file_events_library ON file_events(library_id, ms);

  CREATE TABLE pending_uploads (
    pathhash TEXT PRIMARY KEY,
    library_id INTEGER NOT NULL REFERENCES libraries(id) ON DELETE CASCADE,
    fullpath TEXT NOT NULL,
    filehash TEXT NOT NULL,
    filesize INTEGER NOT NULL,
    overwrite INTEGER NOT NULL,
    op_id INTEGER NOT NULL DEFAULT 0,
    op_name TEXT NOT NULL DEFAULT '',
    created_ms INTEGER NOT NULL
  );

  -- status: 0 queued, 1 running, 2 finished, 3 failed.
  CREATE TABLE copy_queue (
    id INTEGER PRIMARY KEY,
    library_id INTEGER NOT NULL REFERENCES libraries(id) ON DELETE CASCADE,
    source_id INTEGER NOT NULL,
    target_id INTEGER NOT NULL,
    fullpath TEXT NOT NULL,
    status INTEGER NOT NULL DEFAULT 0,
    op_id INTEGER NOT NULL DEFAULT 0,
    op_name TEXT NOT NULL DEFAULT '',
    error TEXT,
    add_ms INTEGER NOT NULL,
    start_ms INTEGER,
    finish_ms INTEGER
  );

  -- Blob references.
  CREATE TRIGGER entries_blob_ins AFTER INSERT ON entries WHEN NEW.dir = 0 AND NEW.filehash <> '' AND NEW.state < 2
  BEGIN UPDATE blobs SET refs = refs + 1 WHERE sha1 = NEW.filehash; END;
  CREATE TRIGGER entries_blob_del AFTER DELETE ON entries WHEN OLD.dir = 0 AND OLD.filehash <> '' AND OLD.state < 2
  BEGIN UPDATE blobs SET refs = refs - 1 WHERE sha1 = OLD.filehash; END;
  CREATE TRIGGER entries_blob_upd AFTER UPDATE OF filehash, state ON entries
  BEGIN
    UPDATE blobs SET refs = refs - 1 WHERE OLD.dir = 0 AND OLD.filehash <> '' AND OLD.state < 2 AND sha1 = OLD.filehash;
    UPDATE blobs SET refs = refs + 1 WHERE NEW.dir = 0 AND NEW.filehash <> '' AND NEW.state < 2 AND sha1 = NEW.filehash;
  END;
  CREATE TRIGGER events_blob_ins AFTER INSERT ON file_events WHEN NEW.keeps_blob = 1
  BEGIN UPDATE blobs SET refs = refs + 1 WHERE sha1 = NEW.filehash; END;
  CREATE TRIGGER events_blob_upd AFTER UPDATE OF keeps_blob ON file_events WHEN OLD.keeps_blob <> NEW.keeps_blob
  BEGIN UPDATE blobs SET refs = refs + (NEW.keeps_blob - OLD.keeps_blob) WHERE sha1 = NEW.filehash; END;
  CREATE TRIGGER events_blob_del AFTER DELETE ON file_events WHEN OLD.keeps_blob = 1
  BEGIN UPDATE blobs SET refs = refs - 1 WHERE sha1 = OLD.filehash; END;

  -- Library counters: used = present + recycle bin; recycle = recycle bin only; counts = present only.
  CREATE TRIGGER entries_usage_ins AFTER INSERT ON entries
  BEGIN
    UPDATE libraries SET
      size_used = size_used + (CASE WHEN NEW.state < 2 THEN NEW.filesize ELSE 0 END),
      size_recycle = size_recycle + (CASE WHEN NEW.state = 1 THEN NEW.filesize ELSE 0 END),
      file_count = file_count + (CASE WHEN NEW.state = 0 AND NEW.dir = 0 THEN 1 ELSE 0 END),
      dir_count = dir_count + (CASE WHEN NEW.state = 0 AND NEW.dir = 1 THEN 1 ELSE 0 END)
    WHERE id = NEW.library_id;
  END;
  CREATE TRIGGER entries_usage_del AFTER DELETE ON entries
  BEGIN
    UPDATE libraries SET
      size_used = size_used - (CASE WHEN OLD.state < 2 THEN OLD.filesize ELSE 0 END),
      size_recycle = size_recycle - (CASE WHEN OLD.state = 1 THEN OLD.filesize ELSE 0 END),
      file_count = file_count - (CASE WHEN OLD.state = 0 AND OLD.dir = 0 THEN 1 ELSE 0 END),
      dir_count = dir_count - (CASE WHEN OLD.state = 0 AND OLD.dir = 1 THEN 1 ELSE 0 END)
    WHERE id = OLD.library_id;
  END;
  CREATE TRIGGER entries_usage_upd AFTER UPDATE OF filesize, state ON entries
  BEGIN
    UPDATE libraries SET
      size_used = size_used - (CASE WHEN OLD.state < 2 THEN OLD.filesize ELSE 0 END) + (CASE WHEN NEW.state < 2 THEN NEW.filesize ELSE 0 END),
      size_recycle = size_recycle - (CASE WHEN OLD.state = 1 THEN OLD.filesize ELSE 0 END) + (CASE WHEN NEW.state = 1 THEN NEW.filesize ELSE 0 END),
      file_count = file_count - (CASE WHEN OLD.state = 0 AND OLD.dir = 0 THEN 1 ELSE 0 END) + (CASE WHEN NEW.state = 0 AND NEW.dir = 0 THEN 1 ELSE 0 END),
      dir_count = dir_count - (CASE WHEN OLD.state = 0 AND OLD.dir = 1 THEN 1 ELSE 0 END) + (CASE WHEN NEW.state = 0 AND NEW.dir = 1 THEN 1 ELSE 0 END)
    WHERE id = NEW.library_id;
  END;
  `,
  // Access-token refresh expiry, folder permissions (simple and advanced, one model), favorites,
  // metadata templates and their values.
  `
  ALTER TABLE access_tokens ADD COLUMN refresh_expires_ms INTEGER;

  -- One row per subject (kind 'm' member, 'g' department) and folder (entry_id 0 = library root).
  -- codes: JSON object advanced code -> 1 / -1 (0 omitted); role_id > 0 adds the codes of that role.
  CREATE TABLE folder_permissions (
    library_id INTEGER NOT NULL REFERENCES libraries(id) ON DELETE CASCADE,
    entry_id INTEGER NOT NULL,
    subject_kind TEXT NOT NULL,
    subject_id INTEGER NOT NULL,
    role_id INTEGER NOT NULL DEFAULT 0,
    codes TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (library_id, entry_id, subject_kind, subject_id)
  );
  CREATE TABLE folder_inherit (
    entry_id INTEGER PRIMARY KEY,
    inherit INTEGER NOT NULL
  );

  CREATE TABLE favorites (
    member_id INTEGER NOT NULL REFERENCES members(id) ON DELETE CASCADE,
    fav_id INTEGER NOT NULL,
    entry_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (member_id, fav_id, entry_id)
  );

  CREATE TABLE metadata_templates (
    ent_id INTEGER NOT NULL REFERENCES enterprises(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    attributes TEXT NOT NULL,
    PRIMARY KEY (ent_id, key)
  );
  CREATE TABLE library_metadata_templates (
    library_id INTEGER NOT NULL REFERENCES libraries(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    PRIMARY KEY (library_id, key)
  );
  CREATE TABLE entry_metadata (
    entry_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    metadata TEXT NOT NULL,
    display TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (entry_id, key)
  );
  `,
  // traffic statistics per enterprise and day (ent_daily_stats): downloads, share-link downloads, previews.
  `
  CREATE TABLE traffic_daily (
    ent_id INTEGER NOT NULL REFERENCES enterprises(id) ON DELETE CASCADE,
    day TEXT NOT NULL,
    download INTEGER NOT NULL DEFAULT 0,
    link INTEGER NOT NULL DEFAULT 0,
    preview INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (ent_id, day)
  );
  `,
  // Enterprise directory: departments (tree by parent_id, 0 = top level), department membership,
  // departments of libraries with a role, member fields of the sync API, the enterprise log, enterprise
  // settings of the partner API, one-time admin console login tickets.
  `
  CREATE TABLE departments (
    id INTEGER PRIMARY KEY,
    ent_id INTEGER NOT NULL REFERENCES enterprises(id) ON DELETE CASCADE,
    parent_id INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL,
    out_id TEXT,
    orderby INTEGER NOT NULL DEFAULT 0,
    state INTEGER NOT NULL DEFAULT 1,
    created_ms INTEGER NOT NULL
  );
  CREATE UNIQUE INDEX departments_name ON departments(ent_id, parent_id, name);
  CREATE UNIQUE INDEX departments_out_id ON departments(ent_id, out_id) WHERE out_id IS NOT NULL;
  CREATE TABLE department_members (
    group_id INTEGER NOT NULL REFERENCES departments(id) ON DELETE CASCADE,
    member_id INTEGER NOT NULL REFERENCES members(id) ON DELETE CASCADE,
    PRIMARY KEY (group_id, member_id)
  );
  CREATE INDEX department_members_member ON department_members(member_id);
  CREATE TABLE library_groups (
    library_id INTEGER NOT NULL REFERENCES libraries(id) ON DELETE CASCADE,
    group_id INTEGER NOT NULL REFERENCES departments(id) ON DELETE CASCADE,
    role_id INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (library_id, group_id)
  );
  ALTER TABLE members ADD COLUMN expire INTEGER;
  ALTER TABLE members ADD COLUMN leader_id INTEGER;
  ALTER TABLE members ADD COLUMN listed INTEGER NOT NULL DEFAULT 1;
  ALTER TABLE members ADD COLUMN admin_type INTEGER;
  ALTER TABLE members ADD COLUMN personal_capacity INTEGER;
  CREATE UNIQUE INDEX members_out_id ON members(ent_id, out_id) WHERE out_id IS NOT NULL;
  ALTER TABLE enterprises ADD COLUMN sync_enabled INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE enterprises ADD COLUMN max_link_flow INTEGER NOT NULL DEFAULT -1;
  ALTER TABLE enterprises ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';
  ALTER TABLE enterprises ADD COLUMN state INTEGER NOT NULL DEFAULT 1;
  CREATE TABLE ent_log (
    id INTEGER PRIMARY KEY,
    ent_id INTEGER NOT NULL REFERENCES enterprises(id) ON DELETE CASCADE,
    type INTEGER NOT NULL,
    admin TEXT NOT NULL,
    content TEXT NOT NULL,
    ip TEXT NOT NULL DEFAULT '',
    ms INTEGER NOT NULL
  );
  CREATE INDEX ent_log_time ON ent_log(ent_id, ms);
  CREATE TABLE sso_tickets (
    ticket TEXT PRIMARY KEY,
    ent_id INTEGER NOT NULL REFERENCES enterprises(id) ON DELETE CASCADE,
    expires_ms INTEGER NOT NULL
  );
  `,
  // State every process of a service shares (docs/service.md, "Several processes"): chunked upload
  // sessions, share links, web upload keys, the copy queue's leases, and, used on PostgreSQL only, the
  // replay guard's signatures, the blob locks between processes and the wrong link passwords.
  `
  CREATE TABLE upload_sessions (
    id TEXT PRIMARY KEY,
    pathhash TEXT NOT NULL,
    library_id INTEGER NOT NULL,
    fullpath TEXT NOT NULL,
    filename TEXT NOT NULL,
    filehash TEXT NOT NULL,
    filesize INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    touched_ms INTEGER NOT NULL,
    busy TEXT,
    busy_until_ms INTEGER NOT NULL DEFAULT 0,
    writing_from INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    failure TEXT
  );
  CREATE INDEX upload_sessions_pathhash ON upload_sessions(pathhash);
  CREATE TABLE share_links (
    id INTEGER PRIMARY KEY,
    code TEXT NOT NULL UNIQUE,
    library_id INTEGER NOT NULL,
    record TEXT NOT NULL,
    visits INTEGER NOT NULL DEFAULT 0,
    closed INTEGER NOT NULL DEFAULT 0
  );
  CREATE INDEX share_links_library ON share_links(library_id);
  CREATE TABLE web_upload_keys (
    key TEXT PRIMARY KEY,
    library_id INTEGER NOT NULL,
    fullpath TEXT NOT NULL,
    expires_ms INTEGER NOT NULL
  );
  CREATE INDEX web_upload_keys_expiry ON web_upload_keys(expires_ms);
  CREATE TABLE signature_uses (
    sign TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    peer TEXT NOT NULL,
    until_ms INTEGER NOT NULL
  );
  CREATE INDEX signature_uses_expiry ON signature_uses(until_ms);
  CREATE TABLE blob_locks (
    sha1 TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    until_ms INTEGER NOT NULL
  );
  ALTER TABLE copy_queue ADD COLUMN lease_holder TEXT;
  ALTER TABLE copy_queue ADD COLUMN lease_until_ms INTEGER;
  ALTER TABLE copy_queue ADD COLUMN claims INTEGER NOT NULL DEFAULT 0;
  CREATE TABLE link_password_failures (
    key TEXT PRIMARY KEY,
    count INTEGER NOT NULL,
    since_ms INTEGER NOT NULL
  );
  CREATE INDEX link_password_failures_since ON link_password_failures(since_ms);
  `,
  // upload blocks staged in an object store (store/s3-staged-uploads.ts); leases of the service's sweeps
  `
  CREATE TABLE upload_parts (
    session_id TEXT NOT NULL,
    start INTEGER NOT NULL,
    length INTEGER NOT NULL,
    PRIMARY KEY (session_id, start)
  );
  CREATE TABLE service_leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    until_ms INTEGER NOT NULL
  );
  `,
  // a counter every change of what a library call's authentication reads moves (kept by PostgreSQL's
  // processes, http/authorization-cache.ts; the same here so both schemas have the same tables)
  `
  CREATE TABLE authorization_epoch (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n INTEGER NOT NULL
  );
  INSERT INTO authorization_epoch (id, n) VALUES (1, 0);
  CREATE TRIGGER library_auths_epoch_upd AFTER UPDATE ON library_auths BEGIN UPDATE authorization_epoch SET n = n + 1 WHERE id = 1; END;
  CREATE TRIGGER library_auths_epoch_del AFTER DELETE ON library_auths BEGIN UPDATE authorization_epoch SET n = n + 1 WHERE id = 1; END;
  CREATE TRIGGER libraries_epoch_del AFTER DELETE ON libraries BEGIN UPDATE authorization_epoch SET n = n + 1 WHERE id = 1; END;
  CREATE TRIGGER libraries_epoch_upd AFTER UPDATE OF deleted, ent_id ON libraries
    WHEN OLD.deleted IS NOT NEW.deleted OR OLD.ent_id IS NOT NEW.ent_id BEGIN UPDATE authorization_epoch SET n = n + 1 WHERE id = 1; END;
  CREATE TRIGGER enterprises_epoch_upd AFTER UPDATE OF trial, end_dateline ON enterprises
    WHEN OLD.trial IS NOT NEW.trial OR OLD.end_dateline IS NOT NEW.end_dateline BEGIN UPDATE authorization_epoch SET n = n + 1 WHERE id = 1; END;
  CREATE TRIGGER enterprises_epoch_del AFTER DELETE ON enterprises BEGIN UPDATE authorization_epoch SET n = n + 1 WHERE id = 1; END;
  `,
  // PostgreSQL's replay guard table made unlogged; here the guard is in memory and the table unused
  `
  SELECT 1;
  `,
  // whether a free session's writing_from is the count of bytes received (was busy_until_ms = -1)
  `
  ALTER TABLE upload_sessions ADD COLUMN received_known INTEGER NOT NULL DEFAULT 0;
  UPDATE upload_sessions SET received_known = 1, busy_until_ms = 0 WHERE busy_until_ms = -1;
  `,
];
