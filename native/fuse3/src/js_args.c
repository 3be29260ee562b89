/*
 * The N-API argument layer: records into request objects and batches for JavaScript, and the arguments
 * of the calls JavaScript makes.
 */
#include "engine_i.h"

/* ---- N-API helpers --------------------------------------------------------------------------- */


void set_num(napi_env env, napi_value obj, const char *key, double v) {
  napi_value n;
  napi_create_double(env, v, &n);
  napi_set_named_property(env, obj, key, n);
}

void set_str(napi_env env, napi_value obj, const char *key, const char *v) {
  if (!v) return;
  napi_value str;
  napi_create_string_utf8(env, v, NAPI_AUTO_LENGTH, &str);
  napi_set_named_property(env, obj, key, str);
}

/* Finalizer of a write's data Buffer: frees it and tells V8 the memory is gone. */
static void free_data(napi_env env, void *data, void *hint) {
  int64_t ignored;
  free(data);
  napi_adjust_external_memory(env, -(int64_t)(uintptr_t)hint, &ignored);
}

/* Sets `key` of `o` to a Buffer of q's data, which it takes over. */
static void set_data(napi_env env, napi_value o, const char *key, queued *q) {
  napi_value buf;
  if (napi_create_external_buffer(env, q->data_len, q->data, free_data, (void *)(uintptr_t)q->data_len, &buf) == napi_ok) {
    /* The Buffer owns it now; V8 counts it, so garbage collection keeps up with the data rate. */
    int64_t ignored;
    napi_adjust_external_memory(env, (int64_t)q->data_len, &ignored);
    q->data = NULL;
  } else {
    napi_create_buffer_copy(env, q->data_len, q->data, NULL, &buf);
  }
  napi_set_named_property(env, o, key, buf);
}

static napi_value request_object(napi_env env, session *s, queued *q) {
  napi_value o;
  napi_create_object(env, &o);
  set_num(env, o, "op", q->op);
  set_num(env, o, "id", q->id);
  set_num(env, o, "ino", (double)q->ino);
  if (q->has_fh) set_num(env, o, "fh", (double)q->fh);
  if (q->answered) set_num(env, o, "answered", 1);
  switch (q->op) {
    case OP_INIT:
      set_num(env, o, "maxWrite", s->got_max_write);
      set_num(env, o, "maxReadahead", s->got_max_readahead);
      set_num(env, o, "maxBackground", s->got_max_background);
      set_num(env, o, "writeback", s->got_writeback);
      break;
    case OP_FORGET:
      set_num(env, o, "nlookup", (double)q->size);
      break;
    case OP_SETATTR:
      set_num(env, o, "valid", q->valid);
      set_num(env, o, "mode", q->mode);
      set_num(env, o, "uid", q->uid);
      set_num(env, o, "gid", q->gid);
      set_num(env, o, "size", (double)q->size);
      set_num(env, o, "atimeMs", q->atime_ms);
      set_num(env, o, "mtimeMs", q->mtime_ms);
      break;
    case OP_RENAME:
      set_num(env, o, "newparent", (double)q->ino2);
      set_str(env, o, "newname", q->name2);
      set_num(env, o, "flags", q->flags);
      set_num(env, o, "pathsEpoch", (double)q->size);
      break;
    case OP_MKDIR:
    case OP_CREATE:
      set_num(env, o, "mode", q->mode);
      set_num(env, o, "flags", q->flags);
      if (q->answered) {
        set_num(env, o, "newIno", (double)q->ino2);
        set_num(env, o, "mtimeMs", q->mtime_ms);
        set_str(env, o, "journalId", q->name2);
        if (q->backing) set_num(env, o, "backingId", q->backing);
      }
      break;
    case OP_FLUSH:
      if (!q->answered) break;
      /* A close answered here: its record's number, the version's id, the close record written, and (passthrough) the spool's time when read. */
      set_num(env, o, "record", (double)q->ino2);
      set_str(env, o, "journalId", q->name2);
      set_data(env, o, "closeRecord", q);
      if (q->spool_mtime_ns > 0) {
        napi_value ns;
        if (napi_create_bigint_int64(env, q->spool_mtime_ns, &ns) == napi_ok) napi_set_named_property(env, o, "spoolMtimeNs", ns);
      }
      break;
    case OP_OPEN:
    case OP_OPENDIR:
    case OP_FSYNC:
    case OP_FSYNCDIR:
    case OP_ACCESS:
    case OP_RELEASE:
      set_num(env, o, "flags", q->flags);
      break;
    case OP_SYMLINK:
      set_str(env, o, "target", q->name2);
      break;
    case OP_FALLOCATE:
      set_num(env, o, "offset", (double)q->offset);
      set_num(env, o, "size", (double)q->size);
      break;
    case OP_READ:
    case OP_READDIR:
    case OP_READDIRPLUS:
      set_num(env, o, "size", (double)q->size);
      set_num(env, o, "offset", (double)q->offset);
      break;
    case OP_GETXATTR:
    case OP_LISTXATTR:
      set_num(env, o, "size", (double)q->size);
      break;
    case OP_HASHED:
      set_num(env, o, "seq", (double)q->ino2);
      set_num(env, o, "size", (double)q->size);
      break;
    case OP_WROTE:
      set_num(env, o, "offset", (double)q->offset);
      set_num(env, o, "size", (double)q->size);
      set_num(env, o, "errno", q->flags);
      set_num(env, o, "seq", (double)q->ino2);
      break;
    case OP_WRITE:
      set_num(env, o, "offset", (double)q->offset);
      /* fallthrough */
    case OP_SETXATTR:
      set_num(env, o, "flags", q->flags);
      set_data(env, o, "data", q);
      break;
    default:
      break;
  }
  set_str(env, o, "name", q->name);
  return o;
}

/* The records in `q` as an array of request objects (freeing them). */
static napi_value batch_of(napi_env env, session *s, queued *q);

/* Runs on the main thread: hands everything queued so far to JavaScript in one call. */
void call_js(napi_env env, napi_value js_cb, void *context, void *data) {
  session *s = context;
  pthread_mutex_lock(&s->lock);
  queued *q = s->head;
  s->head = s->tail = NULL;
  s->scheduled = 0;
  pthread_mutex_unlock(&s->lock);
  if (!env) {
    while (q) {
      queued *next = q->next;
      free_queued(q);
      q = next;
    }
    return;
  }
  napi_value batch = batch_of(env, s, q);
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  napi_call_function(env, undefined, js_cb, 1, &batch, NULL);
}

static napi_value batch_of(napi_env env, session *s, queued *q) {
  napi_value batch;
  napi_create_array(env, &batch);
  uint32_t i = 0;
  size_t answered = 0;
  while (q) {
    queued *next = q->next;
    if (q->answered && (q->op == OP_WRITE || q->op == OP_FLUSH)) answered += q->data_len;
    napi_set_element(env, batch, i++, request_object(env, s, q));
    free_queued(q);
    q = next;
  }
  if (answered) {
    pthread_mutex_lock(&s->lock);
    s->answered_bytes -= answered;
    pthread_mutex_unlock(&s->lock);
  }
  return batch;
}


/* The session and the other arguments of a call that takes `want` of them; NULL (thrown) when any is missing. */
session *session_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv, const char *usage) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < want) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  return get_session(env, argv[0]);
}

/*
 * takeQueued(session) → the requests and records queued and not yet handed over (records queued
 * quietly wait for the next request otherwise): at unmount, so that no answered write is left behind.
 */

napi_value js_take_queued(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  session *s = session_args(env, info, 1, argv, "takeQueued(session)");
  if (!s) return NULL;
  pthread_mutex_lock(&s->lock);
  queued *q = s->head;
  s->head = s->tail = NULL;
  pthread_mutex_unlock(&s->lock);
  return batch_of(env, s, q);
}

session *get_session(napi_env env, napi_value v) {
  session *s = NULL;
  if (napi_get_value_external(env, v, (void **)&s) != napi_ok || !s) {
    napi_throw_type_error(env, NULL, "expected a FUSE session");
    return NULL;
  }
  return s;
}

int get_u32_prop(napi_env env, napi_value obj, const char *key, unsigned *out) {
  napi_value v;
  bool has = false;
  napi_has_named_property(env, obj, key, &has);
  if (!has) return 0;
  napi_get_named_property(env, obj, key, &v);
  uint32_t u;
  if (napi_get_value_uint32(env, v, &u) != napi_ok) return -1;
  *out = u;
  return 1;
}

char *get_string(napi_env env, napi_value v) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) return NULL;
  char *str = malloc(len + 1);
  if (!str) return NULL;
  napi_get_value_string_utf8(env, v, str, len + 1, &len);
  return str;
}

napi_value bool_value(napi_env env, int b) {
  napi_value v;
  napi_get_boolean(env, b, &v);
  return v;
}

int arg_request_info(napi_env env, napi_callback_info info, size_t want, napi_value *argv, session **s, fuse_req_t *req, slot_info *sinfo) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < want) {
    napi_throw_type_error(env, NULL, "missing arguments");
    return 0;
  }
  *s = get_session(env, argv[0]);
  if (!*s) return 0;
  double id;
  if (napi_get_value_double(env, argv[1], &id) != napi_ok) {
    napi_throw_type_error(env, NULL, "expected a request id");
    return 0;
  }
  *req = slot_take_info(*s, id, sinfo);
  return 1;
}

int arg_request(napi_env env, napi_callback_info info, size_t want, napi_value *argv, session **s, fuse_req_t *req) {
  return arg_request_info(env, info, want, argv, s, req, NULL);
}

/* Reads a stat record: Float64Array [ino, mode, nlink, uid, gid, size, blocks, blksize, atimeMs, mtimeMs, ctimeMs]. */
/* The 11 stat fields JavaScript sends (ino, mode, nlink, uid, gid, size, blocks, blksize, atime, mtime, ctime in ms). */
void stat_from_fields(const double *f, struct stat *st) {
  memset(st, 0, sizeof(*st));
  st->st_ino = (ino_t)f[0];
  st->st_mode = (mode_t)f[1];
  st->st_nlink = (nlink_t)f[2];
  st->st_uid = (uid_t)f[3];
  st->st_gid = (gid_t)f[4];
  st->st_size = (off_t)f[5];
  st->st_blocks = (blkcnt_t)f[6];
  st->st_blksize = (blksize_t)f[7];
  double t[3] = { f[8], f[9], f[10] };
  struct timespec *ts[3] = { &st->st_atim, &st->st_mtim, &st->st_ctim };
  for (int i = 0; i < 3; i++) {
    double sec = t[i] / 1000.0;
    ts[i]->tv_sec = (time_t)sec;
    long nsec = (long)((t[i] - (double)ts[i]->tv_sec * 1000.0) * 1e6);
    if (nsec < 0) nsec = 0;
    if (nsec > 999999999) nsec = 999999999;
    ts[i]->tv_nsec = nsec;
  }
}

int get_stat(napi_env env, napi_value arr, struct stat *st) {
  napi_typedarray_type type;
  size_t length;
  void *data;
  if (napi_get_typedarray_info(env, arr, &type, &length, &data, NULL, NULL) != napi_ok || type != napi_float64_array || length < 11) {
    napi_throw_type_error(env, NULL, "expected a Float64Array of 11 stat fields");
    return 0;
  }
  stat_from_fields(data, st);
  return 1;
}

double get_double(napi_env env, napi_value v) {
  double d = 0;
  napi_get_value_double(env, v, &d);
  return d;
}
