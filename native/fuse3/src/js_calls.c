/*
 * The calls JavaScript makes other than replies: spools, attributes, names, paths, counters, the
 * transport, the spool folder and the log of answered closes.
 */
#include "engine_i.h"

/*
 * spoolAttach(session, fh, fd, hashFrom) → seq: from now on the writes of `fh` go into the file `fd`
 * (which stays JavaScript's: the engine writes through a duplicate of it, and JavaScript must call
 * spoolDetach before closing it). hashFrom >= 0: the spool's first hashFrom bytes are all there is and
 * were written front to back; the hash thread reads them back and hashes them, and goes on with each
 * write that continues them. -1: no hash kept. Records of this attachment's writes carry a `seq` above
 * the number answered. Undefined, and nothing attached, while a write of `fh` the engine answered is
 * still queued for JavaScript: the kernel may already have sent a later write over the same bytes, which
 * would reach the spool first. (JavaScript, for its part, attaches none while it has not made every
 * such write it took.)
 */
napi_value js_spool_attach(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  session *s = session_args(env, info, 4, argv, "spoolAttach(session, fh, fd, hashFrom)");
  if (!s) return NULL;
  double fh = get_double(env, argv[1]), fd = get_double(env, argv[2]), from = get_double(env, argv[3]);
  if (!(fh >= 0) || !(fd >= 0) || fd > 0x7fffffff) {
    napi_throw_range_error(env, NULL, "spoolAttach: expected a handle number and a descriptor >= 0");
    return NULL;
  }
  spool_writer *w = calloc(1, sizeof(spool_writer));
  if (!w) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  w->fh = (uint64_t)fh;
  w->fd = fcntl((int)fd, F_DUPFD_CLOEXEC, 0);
  if (w->fd < 0) {
    int e = errno;
    free(w);
    napi_throw_error(env, NULL, e == EBADF ? "spoolAttach: not an open descriptor" : "spoolAttach: cannot duplicate the descriptor");
    return NULL;
  }
  if (from >= 0 && s->hasher_started) {
    w->sha = EVP_MD_CTX_new();
    if (w->sha && EVP_DigestInit_ex(w->sha, sha1_md(), NULL) != 1) {
      EVP_MD_CTX_free(w->sha);
      w->sha = NULL;
    }
    w->written = (uint64_t)from;
  }
  w->end = w->written;
  pthread_rwlock_wrlock(&s->spool_io);
  /* Writes answered after this see the spool (ll_write answers under spool_io): only those before count. */
  int waiting = 0;
  pthread_mutex_lock(&s->lock);
  for (queued *q = s->head; q && !waiting; q = q->next)
    waiting = q->answered && q->op == OP_WRITE && q->has_fh && q->fh == w->fh;
  pthread_mutex_unlock(&s->lock);
  if (waiting) {
    pthread_rwlock_unlock(&s->spool_io);
    spool_free(w);
    napi_value none;
    napi_get_undefined(env, &none);
    return none;
  }
  pthread_mutex_lock(&s->spool_lock);
  spool_writer *old = spool_unlink(s, w->fh);
  if (old) spool_retire(s, old);
  w->next = s->spools;
  s->spools = w;
  if (w->written > 0) pthread_cond_signal(&s->hash_work);
  double base = (double)s->spool_seq;
  pthread_mutex_unlock(&s->spool_lock);
  pthread_rwlock_unlock(&s->spool_io);
  napi_value result;
  napi_create_double(env, base, &result);
  return result;
}

/*
 * spoolDetach(session, fh) → undefined when `fh` had no spool, else { count, end, errno, hashed, sha1?,
 * hashing? }: the writes of `fh` go through JavaScript again (writes under way finish first). `hashed`:
 * how many of the spool's first bytes the hash covers when every write continued it; `sha1` (hex) is
 * that hash when the hash thread had already caught up, else `hashing` numbers the HASHED record that
 * will carry it (never held up here: the main thread does not wait for the hash).
 */
napi_value js_spool_detach(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  session *s = session_args(env, info, 2, argv, "spoolDetach(session, fh)");
  if (!s) return NULL;
  uint64_t fh = (uint64_t)get_double(env, argv[1]);
  napi_value result;
  char hex[41];
  int have_hex = 0;
  double token = 0;
  pthread_rwlock_wrlock(&s->spool_io);
  pthread_mutex_lock(&s->spool_lock);
  spool_writer *w = spool_unlink(s, fh);
  if (!w) {
    pthread_mutex_unlock(&s->spool_lock);
    pthread_rwlock_unlock(&s->spool_io);
    napi_get_undefined(env, &result);
    return result;
  }
  double count = (double)w->count, end = (double)w->end, hashed = 0;
  int err = w->err;
  /* A hash is of use only when it covers everything written. */
  if (spool_hash_alive(w) && !w->err && w->nahead == 0 && w->written == w->end) {
    hashed = (double)w->written;
    if (!w->hashing && w->hashed == w->written) have_hex = spool_digest(w, hex);
    else token = (double)(w->token = ++s->hash_token);
  }
  spool_retire(s, w);
  /* A reader thread waiting for this writer's hash (spool_wait_hash) waits no more. */
  pthread_cond_broadcast(&s->hash_progress);
  pthread_mutex_unlock(&s->spool_lock);
  pthread_rwlock_unlock(&s->spool_io);
  napi_create_object(env, &result);
  set_num(env, result, "count", count);
  set_num(env, result, "end", end);
  set_num(env, result, "errno", err);
  set_num(env, result, "hashed", hashed);
  if (have_hex) set_str(env, result, "sha1", hex);
  if (token > 0) set_num(env, result, "hashing", token);
  return result;
}

/*
 * spoolWrite(session, fh, data, offset) → bytes written or -errno; undefined when `fh` has no spool. For
 * a write JavaScript received before the handle got its spool: it goes the same way as the engine's own
 * (record queued, hash kept), so the order of the writes is the order they reached the spool.
 */
napi_value js_spool_write(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  session *s = session_args(env, info, 4, argv, "spoolWrite(session, fh, data, offset)");
  if (!s) return NULL;
  void *data;
  size_t len;
  if (napi_get_buffer_info(env, argv[2], &data, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "spoolWrite: expected a Buffer");
    return NULL;
  }
  double off = get_double(env, argv[3]);
  if (!(off >= 0)) {
    napi_throw_range_error(env, NULL, "spoolWrite: expected an offset >= 0");
    return NULL;
  }
  napi_value result;
  int found = 0;
  pthread_rwlock_rdlock(&s->spool_io);
  /* The main thread never waits for the hash thread. */
  ssize_t n = spool_write(s, (uint64_t)get_double(env, argv[1]), data, len, (off_t)off, &found);
  pthread_rwlock_unlock(&s->spool_io);
  if (!found) napi_get_undefined(env, &result);
  else napi_create_double(env, (double)n, &result);
  return result;
}

/* A call (session, ino) that drops what the engine keeps of `ino` with `forget`. */
static napi_value forget_call(napi_env env, napi_callback_info info, const char *usage, void (*forget)(session *, fuse_ino_t)) {
  napi_value argv[2];
  session *s = session_args(env, info, 2, argv, usage);
  if (!s) return NULL;
  forget(s, (fuse_ino_t)get_double(env, argv[1]));
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  return undefined;
}

/* attrForget(session, ino): the attributes of `ino` changed in a way the engine cannot see (a rename, another client). */
napi_value js_attr_forget(napi_env env, napi_callback_info info) {
  return forget_call(env, info, "attrForget(session, ino)", attr_forget);
}

/*
 * attrLive(session, ino, on) → whether the engine keeps no attributes of `ino` from now on (on), or may
 * again (off): while the kernel writes the file itself (passthrough), its size and times change with no
 * request, so none is answered from the cache; it counts as a change under way until then. False when
 * the cache could not take the mark (full): the caller then does not hand the file over.
 */
napi_value js_attr_live(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  size_t argc = 4;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3) {
    napi_throw_type_error(env, NULL, "attrLive(session, ino, on, fd?)");
    return NULL;
  }
  session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  fuse_ino_t ino = (fuse_ino_t)get_double(env, argv[1]);
  bool on = false;
  napi_get_value_bool(env, argv[2], &on);
  napi_valuetype t = napi_undefined;
  if (argc > 3) napi_typeof(env, argv[3], &t);
  int fd = on && t == napi_number ? dup((int)get_double(env, argv[3])) : -1;
  int ok = 1, old_fd = -1;
  pthread_mutex_lock(&s->lock);
  attr_entry *e = attr_find(s, ino, on);
  if (on && e) {
    e->valid = 0;
    e->changed = ++s->epoch;
    e->inflight++;
    /* getattr answered from the spool, with the attributes last answered (when there are some). */
    if (fd >= 0 && e->st.st_ino == ino && !e->has_live_fd) {
      e->live_fd = fd;
      e->has_live_fd = 1;
      e->live_stale = 0;
      fd = -1;
    }
  } else if (on) {
    ok = s->attrs == NULL;
  } else {
    attr_changed(s, ino);
    if (e && e->has_live_fd) {
      old_fd = e->live_fd;
      e->has_live_fd = 0;
    }
  }
  pthread_mutex_unlock(&s->lock);
  if (fd >= 0) close(fd);
  if (old_fd >= 0) close(old_fd);
  return bool_value(env, ok);
}

/*
 * folderNames(session, id, ino, names, timeoutS, where?) → whether the engine keeps them: every name of
 * folder `ino` as the answer to request `id` (still pending) found them, for timeoutS seconds. Refused
 * when a request that may add a name arrived after `id` or is unanswered (apart from `id` itself).
 * `where` ({ library, fullpath }): where the folder is in the Vfs, for the close records of closes
 * answered here; without it, the closes of files created in the folder are JavaScript's.
 */
napi_value js_folder_names(napi_env env, napi_callback_info info) {
  napi_value argv[6];
  size_t argc = 6;
  napi_get_undefined(env, &argv[5]);
  session *s = session_args(env, info, 5, argv, "folderNames(session, id, ino, names, timeoutS, where?)");
  if (!s) return NULL;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  char *library = NULL, *fullpath = NULL;
  napi_valuetype where_type = napi_undefined;
  napi_typeof(env, argv[5], &where_type);
  if (where_type == napi_object) {
    napi_value lib, path;
    napi_valuetype lt = napi_undefined, pt = napi_undefined;
    if (napi_get_named_property(env, argv[5], "library", &lib) == napi_ok) napi_typeof(env, lib, &lt);
    if (napi_get_named_property(env, argv[5], "fullpath", &path) == napi_ok) napi_typeof(env, path, &pt);
    if (lt != napi_string || pt != napi_string) {
      napi_throw_type_error(env, NULL, "where: expected { library: string, fullpath: string }");
      return NULL;
    }
    library = get_string(env, lib);
    fullpath = get_string(env, path);
  } else if (where_type != napi_undefined) {
    napi_throw_type_error(env, NULL, "where: expected { library: string, fullpath: string } or undefined");
    return NULL;
  }
  double id = get_double(env, argv[1]);
  fuse_ino_t ino = (fuse_ino_t)get_double(env, argv[2]);
  double timeout = get_double(env, argv[4]);
  uint32_t count = 0;
  bool is_array = false;
  napi_is_array(env, argv[3], &is_array);
  if (!is_array || napi_get_array_length(env, argv[3], &count) != napi_ok) {
    napi_throw_type_error(env, NULL, "expected an array of names");
    return NULL;
  }
  if (!s->names || ino == 0 || !(timeout > 0) || count >= NAMES_HELD_MAX) {
    free(library);
    free(fullpath);
    return bool_value(env, 0);
  }
  name_set *n = calloc(1, sizeof(name_set));
  uint32_t room = 16;
  while (room < count * 2 + 2) room *= 2;
  if (n) n->slots = calloc(room, sizeof(char *));
  if (!n || !n->slots) {
    free(n);
    free(library);
    free(fullpath);
    return bool_value(env, 0);
  }
  n->ino = ino;
  n->room = room;
  if (library && fullpath) {
    n->library = library;
    n->fullpath = fullpath;
  } else {
    free(library);
    free(fullpath);
  }
  /* Names are put in with the lock held (names_put counts them), after being read from JavaScript. */
  char **read = calloc(count ? count : 1, sizeof(char *));
  int ok = read != NULL;
  for (uint32_t i = 0; ok && i < count; i++) {
    napi_value v;
    if (napi_get_element(env, argv[3], i, &v) != napi_ok || !(read[i] = get_string(env, v))) ok = 0;
  }
  pthread_mutex_lock(&s->lock);
  slot *sl = ok ? slot_peek(s, id) : NULL;
  int keep = sl && s->names_epoch <= sl->epoch && s->names_inflight == (sl->adds_name ? 1 : 0) &&
             (names_find(s, ino) || s->name_set_count < NAME_SETS_MAX);
  for (uint32_t i = 0; keep && i < count; i++) keep = names_put(s, n, read[i]);
  if (keep) {
    names_drop(s, ino);
    n->expires = now_s() + timeout;
    n->paths_epoch = s->paths_epoch;
    n->next = s->names[ino % NAME_SET_BUCKETS];
    s->names[ino % NAME_SET_BUCKETS] = n;
    s->name_set_count++;
  } else {
    names_free(s, n);
  }
  pthread_mutex_unlock(&s->lock);
  if (read)
    for (uint32_t i = 0; i < count; i++) free(read[i]);
  free(read);
  if (!ok) {
    napi_throw_type_error(env, NULL, "expected an array of names (strings)");
    return NULL;
  }
  return bool_value(env, keep);
}


/*
 * pathsKept(session, epoch) → boolean: the rename whose record carried `epoch` was of a file, so no
 * folder's path changed: when no rename came since, the folder paths told before it, and the files
 * created in folders whose paths were told, are valid again (those created under the rename's two names
 * stay JavaScript's). False when another rename came meanwhile (its own answer decides).
 */
napi_value js_paths_kept(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  session *s = session_args(env, info, 2, argv, "pathsKept(session, epoch)");
  if (!s) return NULL;
  double epoch = get_double(env, argv[1]);
  if (!(epoch >= 1)) {
    napi_throw_range_error(env, NULL, "pathsKept: expected the epoch of a rename record");
    return NULL;
  }
  int kept = 0;
  pthread_mutex_lock(&s->lock);
  uint64_t now = (uint64_t)epoch;
  if (s->paths_epoch == now) {
    kept = 1;
    if (s->names)
      for (uint32_t b = 0; b < NAME_SET_BUCKETS; b++)
        for (name_set *n = s->names[b]; n; n = n->next)
          if (n->paths_epoch == now - 1) n->paths_epoch = now;
    for (created_file *c = s->created; c; c = c->next)
      if (c->paths_epoch == now - 1) c->paths_epoch = now;
  }
  pthread_mutex_unlock(&s->lock);
  return bool_value(env, kept);
}

/* namesForget(session, ino): the names of folder `ino` changed in a way the engine cannot see. */
napi_value js_names_forget(napi_env env, napi_callback_info info) {
  return forget_call(env, info, "namesForget(session, ino)", names_forget);
}

/* answeredCounts(session) → { getattr, writes, times, modes, lookups, creates, closes, spoolsMadeAhead }: requests the engine answered itself. */
napi_value js_answered_counts(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  session *s = session_args(env, info, 1, argv, "answeredCounts(session)");
  if (!s) return NULL;
  pthread_mutex_lock(&s->lock);
  double g = (double)s->getattr_answered, w = (double)s->writes_answered, t = (double)s->times_answered, m = (double)s->modes_answered;
  double l = (double)s->lookups_answered, c = (double)s->creates_answered, k = (double)s->closes_answered;
  pthread_mutex_unlock(&s->lock);
  pthread_mutex_lock(&s->pool_lock);
  double ahead = (double)s->ready_taken;
  pthread_mutex_unlock(&s->pool_lock);
  napi_value result;
  napi_create_object(env, &result);
  set_num(env, result, "getattr", g);
  set_num(env, result, "writes", w);
  set_num(env, result, "times", t);
  set_num(env, result, "modes", m);
  set_num(env, result, "lookups", l);
  set_num(env, result, "creates", c);
  set_num(env, result, "closes", k);
  set_num(env, result, "spoolsMadeAhead", ahead);
  return result;
}

/*
 * transport(session) → { transport: "uring" | "dev", why?, ringRequests, devRequests, queues, depth }:
 * how the kernel's requests reach the session (rings.c), and why not over io_uring when they do not.
 */
napi_value js_transport(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  session *s = session_args(env, info, 1, argv, "transport(session)");
  if (!s) return NULL;
  rings_counts c;
  rings_counts_of(s->rings, &c);
  napi_value result, flagv;
  napi_create_object(env, &result);
  set_str(env, result, "transport", c.transport);
  if (c.why) set_str(env, result, "why", c.why);
  set_num(env, result, "ringRequests", (double)c.ring_requests);
  set_num(env, result, "devRequests", (double)c.dev_requests);
  set_num(env, result, "queues", c.queues);
  set_num(env, result, "depth", c.depth);
  napi_get_boolean(env, rings_passthrough(s->rings) != 0, &flagv);
  napi_set_named_property(env, result, "passthrough", flagv);
  return result;
}

/*
 * The `path | null` argument of a call: the file or folder opened with `flags` (made 0600 with O_CREAT),
 * -1 for null, or -2 once it threw: a type error for anything else, or `failing` and the reason.
 */
static int open_path_arg(napi_env env, napi_value arg, int flags, const char *usage, const char *failing) {
  napi_valuetype t = napi_undefined;
  napi_typeof(env, arg, &t);
  if (t == napi_null) return -1;
  if (t != napi_string) {
    char msg[160];
    snprintf(msg, sizeof(msg), "%s: expected a path or null", usage);
    napi_throw_type_error(env, NULL, msg);
    return -2;
  }
  char *path = get_string(env, arg);
  if (!path) {
    napi_throw_error(env, NULL, "out of memory");
    return -2;
  }
  int fd = open(path, flags, 0600);
  int err = errno;
  free(path);
  if (fd < 0) {
    char msg[160];
    snprintf(msg, sizeof(msg), "%s: %s", failing, strerror(err));
    napi_throw_error(env, NULL, msg);
    return -2;
  }
  return fd;
}

/*
 * spoolFolder(session, path | null): with passthrough, the files the engine creates get their spools in
 * the folder `path` (the upload journal's), under the ids their journal records have; null: none (their
 * creates are JavaScript's). Throws when the folder cannot be opened (nothing changes then).
 */
napi_value js_spool_folder(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  session *s = session_args(env, info, 2, argv, "spoolFolder(session, path | null)");
  if (!s) return NULL;
  int fd = open_path_arg(env, argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC, "spoolFolder(session, path | null)", "cannot open the spool folder");
  if (fd == -2) return NULL;
  /* Its pool, if there is one (spools are made anew otherwise). */
  int pool = fd >= 0 ? openat(fd, ".pool", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  pthread_mutex_lock(&s->pool_lock);
  /* What was made ahead for the folder before goes back to its pool. */
  ready_return_locked(s, s->spool_dir_fd, s->pool_dir_fd);
  pthread_mutex_lock(&s->journal_lock);
  int old = s->spool_dir_fd;
  s->spool_dir_fd = fd;
  pthread_mutex_unlock(&s->journal_lock);
  int old_pool = s->pool_dir_fd;
  s->pool_dir_fd = pool;
  s->pool_count = 0;
  s->pool_empty_until = 0;
  /* The maker starts with the first folder that has a pool (once the session serves: destroy joins it). */
  if (fd >= 0 && pool >= 0 && !s->maker_started && !s->maker_stop && s->se) s->maker_started = pthread_create(&s->maker, NULL, maker_main, s) == 0;
  pthread_cond_broadcast(&s->maker_work);
  pthread_mutex_unlock(&s->pool_lock);
  if (old >= 0) close(old);
  if (old_pool >= 0) close(old_pool);
  napi_value undef;
  napi_get_undefined(env, &undef);
  return undef;
}

/*
 * journalSwitch(session, path | null) → the number of records written before the switch: the records
 * of closes answered here go to the file `path` from now on (made if missing, appended to), none with
 * null (closes are then JavaScript's). Throws when the file cannot be opened (nothing changes then).
 */
napi_value js_journal_switch(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  session *s = session_args(env, info, 2, argv, "journalSwitch(session, path | null)");
  if (!s) return NULL;
  int fd = open_path_arg(env, argv[1], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, "journalSwitch(session, path | null)", "journalSwitch: opening the log failed");
  if (fd == -2) return NULL;
  off_t bytes = 0;
  if (fd >= 0) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
      char msg[160];
      snprintf(msg, sizeof(msg), "journalSwitch: opening the log failed: %s", strerror(errno));
      close(fd);
      napi_throw_error(env, NULL, msg);
      return NULL;
    }
    bytes = st.st_size;
  }
  pthread_mutex_lock(&s->journal_lock);
  int old = s->journal_fd;
  s->journal_fd = fd;
  s->journal_bytes = bytes;
  double records = (double)s->journal_records;
  pthread_mutex_unlock(&s->journal_lock);
  if (old >= 0) close(old);
  napi_value result;
  napi_create_double(env, records, &result);
  return result;
}

/* A counter of the spool's threads (guarded by spool_lock), as a number: `syncs` picks which. */
static napi_value spool_counter(napi_env env, napi_callback_info info, const char *usage, int syncs) {
  napi_value argv[1];
  session *s = session_args(env, info, 1, argv, usage);
  if (!s) return NULL;
  pthread_mutex_lock(&s->spool_lock);
  double n = (double)(syncs ? s->spool_syncs : s->spool_writebacks);
  pthread_mutex_unlock(&s->spool_lock);
  napi_value result;
  napi_create_double(env, n, &result);
  return result;
}

/* spoolWritebacks(session) → how many times the hash thread started the writeback of spool bytes (writebackAheadKiB). */
napi_value js_spool_writebacks(napi_env env, napi_callback_info info) {
  return spool_counter(env, info, "spoolWritebacks(session)", 0);
}

/* spoolSyncs(session) → how many background fdatasyncs of spools the sync thread made (syncAheadKiB). */
napi_value js_spool_syncs(napi_env env, napi_callback_info info) {
  return spool_counter(env, info, "spoolSyncs(session)", 1);
}
