/*
 * The reply calls: JavaScript answering a request by its id (replyErr, replyEntry, …), and invalidateEntry.
 */
#include "engine_i.h"

/*
 * The prologue of a reply function taking N arguments: `argv`, the session `s` and the request `req`;
 * returns (thrown) when arguments are missing, and false when the request is no longer pending.
 */
#define REPLY_ARGS(N)                                                 \
  napi_value argv[N];                                                 \
  session *s;                                                         \
  fuse_req_t req;                                                     \
  if (!arg_request(env, info, N, argv, &s, &req)) return NULL;        \
  if (!req) return bool_value(env, 0)

/* replyErr(session, id, errno) → whether the request was still pending. errno 0 = success without data. */
napi_value js_reply_err(napi_env env, napi_callback_info info) {
  REPLY_ARGS(3);
  fuse_reply_err(req, (int)get_double(env, argv[2]));
  return bool_value(env, 1);
}

/*
 * The arguments of an answer carrying an entry (session, id, stat, entryTimeoutS, attrTimeoutS, and
 * `want` in all): 1 with the entry in `e` (its attributes kept in the engine's cache), 0 when the request
 * is no longer pending (false answered), -1 when thrown or answered EIO (bad stat).
 */
static int entry_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv, fuse_req_t *req, struct fuse_entry_param *e) {
  session *s;
  slot_info sinfo;
  if (!arg_request_info(env, info, want, argv, &s, req, &sinfo)) return -1;
  if (!*req) return 0;
  memset(e, 0, sizeof(*e));
  if (!get_stat(env, argv[2], &e->attr)) {
    fuse_reply_err(*req, EIO);
    return -1;
  }
  e->ino = e->attr.st_ino;
  e->generation = 1;
  e->entry_timeout = get_double(env, argv[3]);
  e->attr_timeout = get_double(env, argv[4]);
  attr_fill(s, &sinfo, &e->attr, e->attr_timeout);
  return 1;
}

#define ENTRY_ARGS(N)                                           \
  napi_value argv[N];                                           \
  fuse_req_t req;                                               \
  struct fuse_entry_param e;                                    \
  int got = entry_args(env, info, N, argv, &req, &e);           \
  if (got < 0) return NULL;                                     \
  if (got == 0) return bool_value(env, 0)

/* replyEntry(session, id, stat, entryTimeoutS, attrTimeoutS) */
napi_value js_reply_entry(napi_env env, napi_callback_info info) {
  ENTRY_ARGS(5);
  fuse_reply_entry(req, &e);
  return bool_value(env, 1);
}

/* replyNegative(session, id, timeoutS): "no such entry", remembered by the kernel for timeoutS. */
napi_value js_reply_negative(napi_env env, napi_callback_info info) {
  REPLY_ARGS(3);
  struct fuse_entry_param e;
  memset(&e, 0, sizeof(e));
  e.entry_timeout = get_double(env, argv[2]);
  fuse_reply_entry(req, &e);
  return bool_value(env, 1);
}

/* replyAttr(session, id, stat, attrTimeoutS) */
napi_value js_reply_attr(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  session *s;
  fuse_req_t req;
  slot_info sinfo;
  if (!arg_request_info(env, info, 4, argv, &s, &req, &sinfo)) return NULL;
  if (!req) return bool_value(env, 0);
  struct stat st;
  if (!get_stat(env, argv[2], &st)) {
    fuse_reply_err(req, EIO);
    return NULL;
  }
  attr_fill(s, &sinfo, &st, get_double(env, argv[3]));
  fuse_reply_attr(req, &st, get_double(env, argv[3]));
  return bool_value(env, 1);
}

/* Open reply flags. */
#define OPEN_DIRECT_IO 1
#define OPEN_KEEP_CACHE 2

static void fill_fi(struct fuse_file_info *fi, double fh, int flags) {
  memset(fi, 0, sizeof(*fi));
  fi->fh = (uint64_t)fh;
  fi->direct_io = (flags & OPEN_DIRECT_IO) != 0;
  fi->keep_cache = (flags & OPEN_KEEP_CACHE) != 0;
}

/* replyOpen(session, id, fh, flags) */
napi_value js_reply_open(napi_env env, napi_callback_info info) {
  REPLY_ARGS(4);
  struct fuse_file_info fi;
  fill_fi(&fi, get_double(env, argv[2]), (int)get_double(env, argv[3]));
  if (fuse_reply_open(req, &fi) == -ENOENT) return bool_value(env, 0); /* interrupted: the kernel releases nothing */
  return bool_value(env, 1);
}


/* backingOpen(session, fd) → the backing id (> 0), or -errno when the kernel refused the file. */
napi_value js_backing_open(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  session *s = session_args(env, info, 2, argv, "backingOpen(session, fd)");
  if (!s) return NULL;
  napi_value out;
  napi_create_int32(env, backing_open(s, (int)get_double(env, argv[1])), &out);
  return out;
}

/* backingClose(session, id) → 0, or -errno. */
napi_value js_backing_close(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  session *s = session_args(env, info, 2, argv, "backingClose(session, id)");
  if (!s) return NULL;
  napi_value out;
  napi_create_int32(env, backing_close(s, (int)get_double(env, argv[1])), &out);
  return out;
}

/* replyOpenBacking(session, id, fh, backingId): the open answered with a backing file. */
napi_value js_reply_open_backing(napi_env env, napi_callback_info info) {
  REPLY_ARGS(4);
  open_out o;
  memset(&o, 0, sizeof(o));
  o.fh = (uint64_t)get_double(env, argv[2]);
  o.open_flags = FOPEN_PASSTHROUGH_FLAG;
  o.backing_id = (int32_t)get_double(env, argv[3]);
  if (fuse_reply_buf(req, (const char *)&o, sizeof(o)) == -ENOENT) return bool_value(env, 0);
  return bool_value(env, 1);
}

/* replyCreate(session, id, stat, entryTimeoutS, attrTimeoutS, fh, flags) */
napi_value js_reply_create(napi_env env, napi_callback_info info) {
  ENTRY_ARGS(7);
  struct fuse_file_info fi;
  fill_fi(&fi, get_double(env, argv[5]), (int)get_double(env, argv[6]));
  if (fuse_reply_create(req, &e, &fi) == -ENOENT) return bool_value(env, 0);
  return bool_value(env, 1);
}

/* replyCreateBacking(session, id, stat, entryTimeoutS, attrTimeoutS, fh, backingId): the create answered with a backing file. */
napi_value js_reply_create_backing(napi_env env, napi_callback_info info) {
  ENTRY_ARGS(7);
  if (reply_create_backing(req, &e, (uint64_t)get_double(env, argv[5]), (int)get_double(env, argv[6])) == -ENOENT) return bool_value(env, 0);
  return bool_value(env, 1);
}

/* replyWrite(session, id, count) */
napi_value js_reply_write(napi_env env, napi_callback_info info) {
  REPLY_ARGS(3);
  fuse_reply_write(req, (size_t)get_double(env, argv[2]));
  return bool_value(env, 1);
}

/* replyXattrSize(session, id, size) */
napi_value js_reply_xattr(napi_env env, napi_callback_info info) {
  REPLY_ARGS(3);
  fuse_reply_xattr(req, (size_t)get_double(env, argv[2]));
  return bool_value(env, 1);
}

/* replyData(session, id, buffers: Buffer[], limit): the buffers in order, at most `limit` bytes in all. */
napi_value js_reply_data(napi_env env, napi_callback_info info) {
  REPLY_ARGS(4);
  uint32_t n = 0;
  napi_get_array_length(env, argv[2], &n);
  size_t limit = (size_t)get_double(env, argv[3]);
  struct iovec small[16];
  struct iovec *iov = n <= 16 ? small : malloc(n * sizeof(struct iovec));
  if (!iov) {
    fuse_reply_err(req, ENOMEM);
    return bool_value(env, 1);
  }
  int count = 0;
  size_t total = 0;
  for (uint32_t i = 0; i < n && total < limit; i++) {
    napi_value b;
    napi_get_element(env, argv[2], i, &b);
    void *p;
    size_t len;
    if (napi_get_buffer_info(env, b, &p, &len) != napi_ok) continue;
    if (len > limit - total) len = limit - total;
    if (len == 0) continue;
    iov[count].iov_base = p;
    iov[count].iov_len = len;
    count++;
    total += len;
  }
  if (count == 0) fuse_reply_buf(req, NULL, 0);
  else fuse_reply_iov(req, iov, count);
  if (iov != small) free(iov);
  return bool_value(env, 1);
}

/*
 * replyFd(session, id, fd, position, length): answers a read with `length` bytes at `position` of `fd`,
 * read by libfuse into a buffer of its own and written to the kernel (the bytes never enter JavaScript).
 * A failed read answers its errno. → whether the request was still pending.
 */
napi_value js_reply_fd(napi_env env, napi_callback_info info) {
  REPLY_ARGS(5);
  double fd = get_double(env, argv[2]), pos = get_double(env, argv[3]), len = get_double(env, argv[4]);
  if (!(fd >= 0 && fd <= 0x7fffffff && pos >= 0 && len >= 0 && len <= 0x7fffffff)) {
    fuse_reply_err(req, EINVAL);
    return bool_value(env, 1);
  }
  struct fuse_bufvec bufv = FUSE_BUFVEC_INIT((size_t)len);
  bufv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
  bufv.buf[0].fd = (int)fd;
  bufv.buf[0].pos = (off_t)pos;
  fuse_reply_data(req, &bufv, FUSE_BUF_NO_SPLICE);
  return bool_value(env, 1);
}

/* Writes entry i, named `name`, of a listing answer into `buf` (at most `room` bytes); answers the size it needs. */
typedef size_t (*entry_writer)(fuse_req_t req, char *buf, size_t room, const char *name, uint32_t i, off_t off, const void *ctx);

/*
 * Answers a readdir or readdirplus with the entries of `names` (at most `most`) that fit in `size` bytes,
 * the offset of entry i being first + i + 1; answers how many went in.
 */
static int32_t reply_entries(napi_env env, fuse_req_t req, size_t size, napi_value names, uint32_t most, double first, entry_writer write, const void *ctx) {
  uint32_t n = 0;
  napi_get_array_length(env, names, &n);
  if (n > most) n = most;
  char *buf = malloc(size ? size : 1);
  if (!buf) {
    fuse_reply_err(req, ENOMEM);
    return -1;
  }
  size_t used = 0;
  int32_t added = 0;
  char name[1024];
  for (uint32_t i = 0; i < n; i++) {
    napi_value e;
    napi_get_element(env, names, i, &e);
    size_t len = 0;
    if (napi_get_value_string_utf8(env, e, name, sizeof(name), &len) != napi_ok) break;
    size_t need = write(req, buf + used, size - used, name, i, (off_t)(first + i + 1), ctx);
    if (need > size - used) break;
    used += need;
    added++;
  }
  fuse_reply_buf(req, buf, used);
  free(buf);
  return added;
}

typedef struct { const double *inos; const uint8_t *dirs; } dir_entries;

static size_t write_dir_entry(fuse_req_t req, char *buf, size_t room, const char *name, uint32_t i, off_t off, const void *ctx) {
  const dir_entries *d = ctx;
  struct stat st;
  memset(&st, 0, sizeof(st));
  st.st_ino = (ino_t)d->inos[i];
  st.st_mode = d->dirs[i] ? S_IFDIR : S_IFREG;
  return fuse_add_direntry(req, buf, room, name, &st, off);
}

typedef struct { const double *stats; double entry_timeout; double attr_timeout; } dir_plus_entries;

static size_t write_dir_plus_entry(fuse_req_t req, char *buf, size_t room, const char *name, uint32_t i, off_t off, const void *ctx) {
  const dir_plus_entries *d = ctx;
  struct fuse_entry_param ep;
  memset(&ep, 0, sizeof(ep));
  stat_from_fields(d->stats + (size_t)i * 11, &ep.attr);
  ep.ino = ep.attr.st_ino;
  ep.generation = 1;
  ep.entry_timeout = d->entry_timeout;
  ep.attr_timeout = d->attr_timeout;
  return fuse_add_direntry_plus(req, buf, room, name, &ep, off);
}

/*
 * replyDir(session, id, size, names: string[], inos: Float64Array, dirs: Uint8Array, firstOffset) → entries
 * added: directory entries from `firstOffset` on (the offset of entry i is firstOffset + i + 1), as many
 * as fit in `size` bytes.
 */
napi_value js_reply_dir(napi_env env, napi_callback_info info) {
  napi_value argv[7];
  session *s;
  fuse_req_t req;
  if (!arg_request(env, info, 7, argv, &s, &req)) return NULL;
  napi_value result;
  int32_t added = -1;
  if (req) {
    napi_typedarray_type type;
    size_t ilen = 0, dlen = 0;
    void *idata = NULL, *ddata = NULL;
    napi_get_typedarray_info(env, argv[4], &type, &ilen, &idata, NULL, NULL);
    napi_get_typedarray_info(env, argv[5], &type, &dlen, &ddata, NULL, NULL);
    dir_entries d = { idata, ddata };
    added = reply_entries(env, req, (size_t)get_double(env, argv[2]), argv[3], (uint32_t)(ilen < dlen ? ilen : dlen), get_double(env, argv[6]), write_dir_entry, &d);
  }
  napi_create_int32(env, added, &result);
  return result;
}

/*
 * replyDirPlus(session, id, size, names: string[], stats: Float64Array (11 fields an entry, as replyAttr
 * takes), entryTimeoutS, attrTimeoutS, firstOffset) → entries added: as replyDir, each entry with its
 * attributes, so that `ls -l` needs no lookup a name. The kernel counts one lookup for every entry added
 * other than "." and ".."; the caller takes back those it counted for entries that did not fit.
 */
napi_value js_reply_dir_plus(napi_env env, napi_callback_info info) {
  napi_value argv[8];
  session *s;
  fuse_req_t req;
  if (!arg_request(env, info, 8, argv, &s, &req)) return NULL;
  napi_value result;
  int32_t added = -1;
  if (req) {
    napi_typedarray_type type;
    size_t slen = 0;
    void *sdata = NULL;
    if (napi_get_typedarray_info(env, argv[4], &type, &slen, &sdata, NULL, NULL) != napi_ok || type != napi_float64_array) {
      fuse_reply_err(req, EIO);
      napi_throw_type_error(env, NULL, "expected a Float64Array of 11 stat fields an entry");
      return NULL;
    }
    dir_plus_entries d = { sdata, get_double(env, argv[5]), get_double(env, argv[6]) };
    added = reply_entries(env, req, (size_t)get_double(env, argv[2]), argv[3], (uint32_t)(slen / 11), get_double(env, argv[7]), write_dir_plus_entry, &d);
  }
  napi_create_int32(env, added, &result);
  return result;
}

/* replyStatfs(session, id, Float64Array [bsize, frsize, blocks, bfree, bavail, files, ffree, favail, fsid, flag, namemax]) */
napi_value js_reply_statfs(napi_env env, napi_callback_info info) {
  REPLY_ARGS(3);
  napi_typedarray_type type;
  size_t length = 0;
  void *data = NULL;
  if (napi_get_typedarray_info(env, argv[2], &type, &length, &data, NULL, NULL) != napi_ok || type != napi_float64_array || length < 11) {
    fuse_reply_err(req, EIO);
    napi_throw_type_error(env, NULL, "expected a Float64Array of 11 statvfs fields");
    return NULL;
  }
  double *f = data;
  struct statvfs st;
  memset(&st, 0, sizeof(st));
  st.f_bsize = (unsigned long)f[0];
  st.f_frsize = (unsigned long)f[1];
  st.f_blocks = (fsblkcnt_t)f[2];
  st.f_bfree = (fsblkcnt_t)f[3];
  st.f_bavail = (fsblkcnt_t)f[4];
  st.f_files = (fsfilcnt_t)f[5];
  st.f_ffree = (fsfilcnt_t)f[6];
  st.f_favail = (fsfilcnt_t)f[7];
  st.f_fsid = (unsigned long)f[8];
  st.f_flag = (unsigned long)f[9];
  st.f_namemax = (unsigned long)f[10];
  fuse_reply_statfs(req, &st);
  return bool_value(env, 1);
}
