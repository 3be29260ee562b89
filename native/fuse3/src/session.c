/*
 * A FUSE session over libfuse 3's low-level API, for Node (N-API): mount, reader threads, unmount,
 * destroy, and the addon's exports. The engine's layout, its threads and its lock order: engine_i.h.
 */
#include "engine_i.h"

/* ---- reader threads ------------------------------------------------------------------------- */

static void *reader_main(void *arg) {
  session *s = arg;
  pthread_setname_np(pthread_self(), "fuse-reader"); /* as `top -H` shows it */
  struct fuse_buf buf = { .mem = NULL };
  while (!fuse_session_exited(s->se)) {
    int res = fuse_session_receive_buf(s->se, &buf);
    if (res == -EINTR) continue;
    if (res <= 0) break;
    fuse_session_process_buf(s->se, &buf);
  }
  free(buf.mem);
  int last;
  pthread_mutex_lock(&s->lock);
  last = --s->readers_running == 0;
  pthread_mutex_unlock(&s->lock);
  /* Some reader ended: the connection is gone or the session was told to exit. Stop the others too. */
  fuse_session_exit(s->se);
  if (last) {
    /* The connection is gone: so is every ring's (their threads end; answers still to come are dropped). */
    rings_stop(s->rings);
    queued *q = new_queued(s, OP_END, NULL, 0);
    if (q) enqueue(s, q);
  }
  return NULL;
}

/* The session's custom I/O (see rings.c): every read and answer, whichever transport carries it. */
static ssize_t io_read(int fd, void *buf, size_t len, void *userdata) {
  return rings_read(((session *)userdata)->rings, fd, buf, len);
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata) {
  return rings_writev(((session *)userdata)->rings, fd, iov, count);
}

/* ---- exported functions ---------------------------------------------------------------------- */

/* mount(mountpoint, options: string[], settings, onBatch) → session */
/* A mount that cannot go on: undoes what was made (the rings, the mount, libfuse's session) and throws. */
static napi_value mount_failed(napi_env env, session *s, int mounted, const char *message) {
  rings_free(s->rings);
  if (mounted) fuse_session_unmount(s->se);
  if (s->se) fuse_session_destroy(s->se);
  free(s->null_by_name);
  free(s->names);
  free(s->attrs);
  free(s->mountpoint);
  free(s);
  napi_throw_error(env, NULL, message);
  return NULL;
}

static napi_value js_mount(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 4) {
    napi_throw_type_error(env, NULL, "mount(mountpoint, options, settings, onBatch)");
    return NULL;
  }
  session *s = calloc(1, sizeof(session));
  if (!s) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  pthread_mutex_init(&s->lock, NULL);
  pthread_mutex_init(&s->spool_lock, NULL);
  pthread_mutex_init(&s->journal_lock, NULL);
  s->journal_fd = -1;
  s->spool_dir_fd = -1;
  s->pool_dir_fd = -1;
  pthread_mutex_init(&s->pool_lock, NULL);
  pthread_cond_init(&s->maker_work, NULL);
  pthread_cond_init(&s->maker_idle, NULL);
  pthread_cond_init(&s->hash_work, NULL);
  pthread_cond_init(&s->sync_work, NULL);
  pthread_cond_init(&s->hash_progress, NULL);
  {
    /* Writers first: an attach or detach is not held up by a stream of direct writes. */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->spool_io, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  s->mountpoint = get_string(env, argv[0]);

  unsigned readers = 1, flag = 0;
  get_u32_prop(env, argv[2], "maxWrite", &s->max_write);
  get_u32_prop(env, argv[2], "maxReadahead", &s->max_readahead);
  get_u32_prop(env, argv[2], "maxBackground", &s->max_background);
  get_u32_prop(env, argv[2], "congestionThreshold", &s->congestion_threshold);
  if (get_u32_prop(env, argv[2], "writeback", &flag) > 0) s->writeback = flag != 0;
  if (get_u32_prop(env, argv[2], "asyncRead", &flag) > 0) s->async_read = flag != 0;
  if (get_u32_prop(env, argv[2], "passthrough", &flag) > 0) s->passthrough_want = flag != 0;
  get_u32_prop(env, argv[2], "readers", &readers);
  /* transport: 0 /dev/fuse only, 1 FUSE over io_uring when the kernel offers it; ringDepth: buffers a queue. */
  unsigned transport = 1, ring_depth = 16;
  get_u32_prop(env, argv[2], "transport", &transport);
  get_u32_prop(env, argv[2], "ringDepth", &ring_depth);
  s->rings_want = transport != 0;
  s->ring_depth = (int)ring_depth;
  unsigned writeback_ahead_kib = 0;
  if (get_u32_prop(env, argv[2], "writebackAheadKiB", &writeback_ahead_kib) > 0) s->writeback_ahead = (uint64_t)writeback_ahead_kib * 1024;
  unsigned sync_ahead_kib = 0;
  if (get_u32_prop(env, argv[2], "syncAheadKiB", &sync_ahead_kib) > 0) s->sync_ahead = (uint64_t)sync_ahead_kib * 1024;
  if (get_u32_prop(env, argv[2], "attrCache", &flag) > 0 && flag) {
    s->attrs = calloc(ATTR_BUCKETS, sizeof(attr_entry *));
    if (get_u32_prop(env, argv[2], "answerSmallWrites", &flag) > 0) s->answer_small = flag != 0;
  }
  if (get_u32_prop(env, argv[2], "folderNames", &flag) > 0 && flag) s->names = calloc(NAME_SET_BUCKETS, sizeof(name_set *));
  get_u32_prop(env, argv[2], "nameMaxBytes", &s->name_max);
  unsigned min_free = 0;
  if (get_u32_prop(env, argv[2], "spoolMinFreeBytes", &min_free) > 0) s->spool_min_free = min_free;
  s->next_ino = CREATED_INO_BASE;
  s->next_fh = CREATED_FH_BASE;
  unsigned timeout_ms = 0;
  if (s->names && s->answer_small && get_u32_prop(env, argv[2], "answerCreates", &flag) > 0 && flag &&
      get_u32_prop(env, argv[2], "uid", &s->create_uid) > 0 && get_u32_prop(env, argv[2], "gid", &s->create_gid) > 0 &&
      get_u32_prop(env, argv[2], "timeoutMs", &timeout_ms) > 0 && timeout_ms > 0) {
    s->answer_creates = 1;
    s->create_timeout = timeout_ms / 1000.0;
  }
  int null_files = get_u32_prop(env, argv[2], "nullFiles", &flag) > 0 && flag;
#ifdef CLOUDLIB_NULL_FILES
  if (null_files && !null_fs_start(s)) {
    free(s->null_by_name);
    free(s->mountpoint);
    free(s);
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
#else
  if (null_files) {
    free(s->mountpoint);
    free(s);
    napi_throw_error(env, NULL, "nullFiles: the null file system is built only into the benchmark's addon (fuse3_bench.node)");
    return NULL;
  }
#endif
  if (readers < 1) readers = 1;
  if (readers > 8) readers = 8;

  uint32_t nopt = 0;
  napi_get_array_length(env, argv[1], &nopt);
  char **args = calloc(nopt + 2, sizeof(char *));
  args[0] = strdup("cloudlib");
  for (uint32_t i = 0; i < nopt; i++) {
    napi_value e;
    napi_get_element(env, argv[1], i, &e);
    args[i + 1] = get_string(env, e);
  }
  struct fuse_args fargs = FUSE_ARGS_INIT((int)nopt + 1, args);
  const struct fuse_lowlevel_ops *ops = &ll_ops;
#ifdef CLOUDLIB_NULL_FILES
  if (null_files) ops = &null_ops;
#endif
  s->se = fuse_session_new(&fargs, ops, sizeof(*ops), s);
  fuse_opt_free_args(&fargs);
  for (uint32_t i = 0; i <= nopt; i++) free(args[i]);
  free(args);
  if (!s->se) return mount_failed(env, s, 0, "fuse_session_new failed (bad mount options)");
  if (fuse_session_mount(s->se, s->mountpoint) != 0) return mount_failed(env, s, 0, "fuse_session_mount failed (see stderr)");
  /* Reads and answers through rings.c, which takes up FUSE over io_uring at INIT when wanted and offered. */
  int fd = fuse_session_fd(s->se);
  s->rings = rings_new(s->se, fd, s->rings_want, s->ring_depth);
  struct fuse_custom_io io = { .read = io_read, .writev = io_writev };
  if (!s->rings || fuse_session_custom_io(s->se, &io, fd) != 0) return mount_failed(env, s, 1, "cannot set up the session's transport");
  rings_on_init_answered(s->rings, init_answered, s);

  napi_value name;
  napi_create_string_utf8(env, "fuse3-requests", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[3], NULL, name, 0, 1, NULL, NULL, s, call_js, &s->tsfn) != napi_ok) {
    return mount_failed(env, s, 1, "cannot create the request queue");
  }

  s->reader_count = (int)readers;
  s->readers_running = (int)readers;
  for (int i = 0; i < s->reader_count; i++) {
    if (pthread_create(&s->readers[i], NULL, reader_main, s) != 0) {
      s->reader_count = i;
      pthread_mutex_lock(&s->lock);
      s->readers_running = i;
      pthread_mutex_unlock(&s->lock);
      break;
    }
  }
  /* Background syncs follow the writeback the hash thread starts: started first, so the hash thread only
   * ever reads `syncer_started` as it stays until both are stopped. */
  s->syncer_started = s->reader_count > 0 && s->writeback_ahead && s->sync_ahead && pthread_create(&s->syncer, NULL, syncer_main, s) == 0;
  /* Without the hash thread, direct writes keep no hash (the seal hashes the spool). */
  s->hasher_started = s->reader_count > 0 && pthread_create(&s->hasher, NULL, hasher_main, s) == 0;
  if (s->reader_count == 0) {
    napi_release_threadsafe_function(s->tsfn, napi_tsfn_abort);
    return mount_failed(env, s, 1, "cannot start a reader thread");
  }
  napi_value ext;
  NAPI_CALL(env, napi_create_external(env, s, NULL, NULL, &ext));
  return ext;
}

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  session *s;
} unmount_job;

static void unmount_execute(napi_env env, void *data) {
  unmount_job *job = data;
  fuse_session_exit(job->s->se);
  fuse_session_unmount(job->s->se);
}

static void unmount_complete(napi_env env, napi_status status, void *data) {
  unmount_job *job = data;
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  napi_resolve_deferred(env, job->deferred, undefined);
  napi_delete_async_work(env, job->work);
  free(job);
}

/* unmount(session) → Promise: tells the readers to stop and unmounts (lazily), off the main thread. */
static napi_value js_unmount(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  session *s = session_args(env, info, 1, argv, "unmount(session)");
  if (!s) return NULL;
  unmount_job *job = calloc(1, sizeof(unmount_job));
  job->s = s;
  napi_value promise, name;
  NAPI_CALL(env, napi_create_promise(env, &job->deferred, &promise));
  napi_create_string_utf8(env, "fuse3-unmount", NAPI_AUTO_LENGTH, &name);
  NAPI_CALL(env, napi_create_async_work(env, NULL, name, unmount_execute, unmount_complete, job, &job->work));
  NAPI_CALL(env, napi_queue_async_work(env, job->work));
  return promise;
}

/*
 * destroy(session) → true once the readers have ended (OP_END): joins them, answers what is still
 * pending with EIO, frees the libfuse session. With a reader still blocked on the device (the kernel
 * kept the connection) it never blocks the main thread: it answers false and only stops the request
 * queue from keeping the process alive.
 */
static napi_value js_destroy(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  session *s = session_args(env, info, 1, argv, "destroy(session)");
  if (!s) return NULL;
  if (!s->se) return bool_value(env, 1);
  pthread_mutex_lock(&s->lock);
  int running = s->readers_running;
  pthread_mutex_unlock(&s->lock);
  if (running > 0) {
    fuse_session_exit(s->se);
    napi_unref_threadsafe_function(env, s->tsfn);
    return bool_value(env, 0);
  }
  for (int i = 0; i < s->reader_count; i++) pthread_join(s->readers[i], NULL);
  s->reader_count = 0;
  pthread_mutex_lock(&s->lock);
  s->closed = 1;
  for (uint32_t i = 0; i < s->slot_count; i++) {
    if (s->slots[i].used) {
      fuse_reply_err(s->slots[i].req, EIO);
      s->slots[i].used = 0;
    }
  }
  pthread_mutex_unlock(&s->lock);
  for (;;) {
    pthread_mutex_lock(&s->lock);
    int busy = s->notifying;
    pthread_mutex_unlock(&s->lock);
    if (!busy) break;
    usleep(1000);
  }
  /* Before the request queue goes: the hash thread queues records. Hashes not finished are dropped. */
  stop_hasher(s);
  napi_release_threadsafe_function(s->tsfn, napi_tsfn_release);
  /* The rings' threads ended with the readers; answers written from here on go to /dev/fuse (gone). */
  fuse_rings *rings = s->rings;
  s->rings = NULL;
  rings_free(rings);
  fuse_session_destroy(s->se);
  s->se = NULL;
  pthread_mutex_lock(&s->lock);
#ifdef CLOUDLIB_NULL_FILES
  null_fs_free(s);
#endif
  if (s->attrs) {
    for (uint32_t i = 0; i < ATTR_BUCKETS; i++) {
      while (s->attrs[i]) {
        attr_entry *e = s->attrs[i];
        s->attrs[i] = e->next;
        if (e->has_live_fd) close(e->live_fd);
        free(e);
      }
    }
    free(s->attrs);
    s->attrs = NULL;
    s->attr_count = 0;
  }
  if (s->names) {
    for (uint32_t i = 0; i < NAME_SET_BUCKETS; i++) {
      while (s->names[i]) {
        name_set *n = s->names[i];
        s->names[i] = n->next;
        names_free(s, n);
      }
    }
    free(s->names);
    s->names = NULL;
    s->name_set_count = 0;
  }
  while (s->created) {
    created_file *c = s->created;
    s->created = c->next;
    created_free(c);
  }
  s->created_count = 0;
  s->created_bytes = 0;
  pthread_mutex_unlock(&s->lock);
  stop_maker(s);
  pthread_mutex_lock(&s->pool_lock);
  ready_return_locked(s, s->spool_dir_fd, s->pool_dir_fd);
  pthread_mutex_unlock(&s->pool_lock);
  pthread_mutex_lock(&s->journal_lock);
  if (s->journal_fd >= 0) close(s->journal_fd);
  s->journal_fd = -1;
  if (s->spool_dir_fd >= 0) close(s->spool_dir_fd);
  s->spool_dir_fd = -1;
  pthread_mutex_unlock(&s->journal_lock);
  /* INIT never answered: its record was never queued. */
  if (s->init_record) free_queued(s->init_record);
  s->init_record = NULL;
  pthread_mutex_lock(&s->pool_lock);
  if (s->pool_dir_fd >= 0) close(s->pool_dir_fd);
  s->pool_dir_fd = -1;
  free(s->pool_names);
  s->pool_names = NULL;
  s->pool_count = 0;
  pthread_mutex_unlock(&s->pool_lock);
  /* The session record itself stays: the external may still be referenced from JavaScript. */
  return bool_value(env, 1);
}

static napi_value init(napi_env env, napi_value exports) {
  struct {
    const char *name;
    napi_callback fn;
  } fns[] = {
    { "mount", js_mount },
    { "unmount", js_unmount },
    { "destroy", js_destroy },
    { "replyErr", js_reply_err },
    { "replyEntry", js_reply_entry },
    { "replyNegative", js_reply_negative },
    { "replyAttr", js_reply_attr },
    { "replyOpen", js_reply_open },
    { "replyCreate", js_reply_create },
    { "replyOpenBacking", js_reply_open_backing },
    { "replyCreateBacking", js_reply_create_backing },
    { "backingOpen", js_backing_open },
    { "backingClose", js_backing_close },
    { "attrLive", js_attr_live },
    { "replyWrite", js_reply_write },
    { "replyXattrSize", js_reply_xattr },
    { "replyData", js_reply_data },
    { "replyFd", js_reply_fd },
    { "replyDir", js_reply_dir },
    { "replyDirPlus", js_reply_dir_plus },
    { "replyStatfs", js_reply_statfs },
    { "invalidateEntry", js_invalidate_entry },
    { "invalidateInode", js_invalidate_inode },
    { "notifyDelete", js_notify_delete },
    { "spoolAttach", js_spool_attach },
    { "spoolDetach", js_spool_detach },
    { "spoolWrite", js_spool_write },
    { "attrForget", js_attr_forget },
    { "folderNames", js_folder_names },
    { "namesForget", js_names_forget },
    { "pathsKept", js_paths_kept },
    { "answeredCounts", js_answered_counts },
    { "transport", js_transport },
    { "spoolWritebacks", js_spool_writebacks },
    { "spoolSyncs", js_spool_syncs },
    { "takeQueued", js_take_queued },
    { "journalSwitch", js_journal_switch },
    { "spoolFolder", js_spool_folder },
    { "encodeCloseRecord", js_encode_close_record },
  };
  for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
    napi_value f;
    napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f);
    napi_set_named_property(env, exports, fns[i].name, f);
  }
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
