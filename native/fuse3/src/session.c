/*
 * FUSE session over libfuse 3's low-level API, for Node (N-API).
 *
 * Reader threads take requests from the session's /dev/fuse descriptor (fuse_session_receive_buf +
 * fuse_session_process_buf). Each request is copied into a queued record (names, and the data of
 * writes and setxattr, into memory of its own: libfuse reuses its buffer for the next request) and the
 * queue is handed to JavaScript in batches: one threadsafe-function call whenever the queue goes from
 * empty to non-empty, which takes everything queued by the time the main thread runs it.
 *
 * JavaScript answers each request with one of the reply functions, by the id it got. Ids name a slot
 * of a table and carry the slot's generation, so an id answered twice (or after the session is gone)
 * is refused instead of touching a freed request.
 *
 * Direct spool writes: a file handle JavaScript has given a spool descriptor (spoolAttach) has its
 * writes answered here, on the reader thread: the request's data is written into the spool with
 * pwrite straight from libfuse's buffer, SHA-1-hashed while the writes come front to back, and the
 * kernel answered. JavaScript only gets a record (handle, offset, length, or the errno of a failed
 * write) in the same queue as the requests, before any request the kernel sends after the answer.
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <node_api.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

enum op_code {
  OP_LOOKUP = 1, OP_FORGET = 2, OP_GETATTR = 3, OP_SETATTR = 4, OP_MKDIR = 5, OP_UNLINK = 6,
  OP_RMDIR = 7, OP_RENAME = 8, OP_OPEN = 9, OP_READ = 10, OP_WRITE = 11, OP_FLUSH = 12,
  OP_RELEASE = 13, OP_FSYNC = 14, OP_OPENDIR = 15, OP_READDIR = 16, OP_RELEASEDIR = 17,
  OP_FSYNCDIR = 18, OP_STATFS = 19, OP_SETXATTR = 20, OP_GETXATTR = 21, OP_LISTXATTR = 22,
  OP_REMOVEXATTR = 23, OP_ACCESS = 24, OP_CREATE = 25, OP_WROTE = 26, OP_READDIRPLUS = 27, OP_HASHED = 28,
  OP_INIT = 98, OP_END = 99,
};

#define SPOOL_AHEAD_MAX 64
/* How far the hash may fall behind the bytes written before a write waits for it (bounds the close's wait). */
#define SPOOL_HASH_LAG_MAX (64ull * 1024 * 1024)
/* The hash thread reads the spool back in pieces of this size. */
#define SPOOL_HASH_CHUNK (256 * 1024)

/*
 * A file handle whose writes go straight into its spool (see "Direct spool writes" above). Guarded by
 * the session's `spool_lock`, apart from what the hash thread does outside it while `hashing` is set
 * (it reads the spool and updates `sha`: nothing else touches `sha` meanwhile).
 */
typedef struct spool_writer {
  struct spool_writer *next;
  uint64_t fh;
  /* A duplicate of JavaScript's descriptor: the engine's own, closed with the writer, so the hash thread
   * may still read the spool after JavaScript has closed its descriptor. */
  int fd;
  /*
   * The SHA-1 of the spool's first `hashed` bytes, computed by the hash thread, which reads them back
   * from the spool (the page cache) behind the writes: the bytes [0, written) are all written, `hashed`
   * follows. Writes beyond `written` (the kernel's writeback sends several at once, not always in order,
   * and several reader threads make them in parallel) are remembered in `ahead` until the bytes before
   * them are written. A write below `written`, or too many ranges ahead, ends the hash (`hash_broken`:
   * the seal then hashes the spool).
   */
  EVP_MD_CTX *sha;
  int hash_broken;
  int hashing;
  uint64_t written;
  uint64_t hashed;
  struct { uint64_t start, end; } ahead[SPOOL_AHEAD_MAX];
  int nahead;
  /* Writes made, and the end of the furthest one. */
  uint64_t count;
  uint64_t end;
  /* The errno of the first failed write: every later write answers it too. */
  int err;
  /* Detached with its hash to finish: the number of the HASHED record that reports it (0: none wanted). */
  uint64_t token;
} spool_writer;

static void spool_free(spool_writer *w);
struct session;
static void *hasher_main(void *arg);
static void stop_hasher(struct session *s);

/* One request waiting for JavaScript. */
typedef struct queued {
  struct queued *next;
  int op;
  double id;
  fuse_ino_t ino;
  fuse_ino_t ino2;
  int has_fh;
  uint64_t fh;
  int64_t offset;
  uint64_t size;
  int flags;
  int mode;
  int valid;
  uint32_t uid, gid;
  double atime_ms, mtime_ms;
  char *name;
  char *name2;
  char *data;
  size_t data_len;
} queued;

typedef struct {
  fuse_req_t req;
  uint32_t gen;
  int used;
} slot;

typedef struct session {
  struct fuse_session *se;
  napi_threadsafe_function tsfn;
  pthread_t readers[8];
  int reader_count;
  int readers_running;
  int end_sent;

  pthread_mutex_t lock;
  queued *head, *tail;
  int scheduled;

  slot *slots;
  uint32_t slot_count;
  uint32_t *free_slots;
  uint32_t free_count;
  int closed;
  /* Notifications being written (destroy waits for them). */
  int notifying;

  /* Handles writing straight into their spools, and their books; guarded by `spool_lock`. */
  pthread_mutex_t spool_lock;
  spool_writer *spools;
  /* Held shared by each direct write from before it looks up its writer until its record is queued;
   * exclusive by attach and detach, so no write reaches a spool after its detach. */
  pthread_rwlock_t spool_io;
  /* Numbers every direct write's record (across handles), so a record is told apart from later attachments'. */
  uint64_t spool_seq;
  /* The hash thread: follows the writes of every writer; finishes the hashes of detached ones (`finishing`)
   * and reports each in a HASHED record. `hash_work` wakes it, `hash_progress` wakes writers waiting for it. */
  pthread_t hasher;
  int hasher_started, hasher_stop;
  pthread_cond_t hash_work, hash_progress;
  spool_writer *finishing;
  uint64_t hash_token;

  /* Asked for at INIT. */
  unsigned max_write, max_readahead, max_background, congestion_threshold;
  int writeback, async_read;
  /* What the kernel agreed to, reported once with OP_INIT. */
  unsigned got_max_write, got_max_readahead, got_max_background;
  int got_writeback;
  char *mountpoint;
} session;

#define SLOT_BITS 20
#define SLOT_MAX (1u << SLOT_BITS)

/* ---- request ids ---------------------------------------------------------------------------- */

static double slot_put(session *s, fuse_req_t req) {
  pthread_mutex_lock(&s->lock);
  uint32_t idx;
  if (s->free_count > 0) {
    idx = s->free_slots[--s->free_count];
  } else {
    if (s->slot_count >= SLOT_MAX) {
      pthread_mutex_unlock(&s->lock);
      return -1;
    }
    uint32_t n = s->slot_count ? s->slot_count * 2 : 256;
    if (n > SLOT_MAX) n = SLOT_MAX;
    slot *grown = realloc(s->slots, n * sizeof(slot));
    uint32_t *free_grown = realloc(s->free_slots, n * sizeof(uint32_t));
    if (!grown || !free_grown) {
      if (grown) s->slots = grown;
      if (free_grown) s->free_slots = free_grown;
      pthread_mutex_unlock(&s->lock);
      return -1;
    }
    s->slots = grown;
    s->free_slots = free_grown;
    for (uint32_t i = s->slot_count; i < n; i++) {
      s->slots[i].used = 0;
      s->slots[i].gen = 0;
      s->slots[i].req = NULL;
    }
    /* Hand out the new slots lowest first. */
    for (uint32_t i = n; i > s->slot_count + 1; i--) s->free_slots[s->free_count++] = i - 1;
    idx = s->slot_count;
    s->slot_count = n;
  }
  slot *sl = &s->slots[idx];
  sl->used = 1;
  sl->req = req;
  sl->gen = (sl->gen + 1) & 0xffffffu;
  double id = (double)sl->gen * (double)SLOT_MAX + (double)idx;
  pthread_mutex_unlock(&s->lock);
  return id;
}

/* Takes the request of `id` out of the table; NULL if the id is not (or no longer) pending. */
static fuse_req_t slot_take(session *s, double id) {
  if (!(id >= 0)) return NULL;
  uint64_t v = (uint64_t)id;
  uint32_t idx = (uint32_t)(v & (SLOT_MAX - 1));
  uint32_t gen = (uint32_t)(v >> SLOT_BITS);
  fuse_req_t req = NULL;
  pthread_mutex_lock(&s->lock);
  if (!s->closed && idx < s->slot_count && s->slots[idx].used && s->slots[idx].gen == gen) {
    req = s->slots[idx].req;
    s->slots[idx].used = 0;
    s->slots[idx].req = NULL;
    s->free_slots[s->free_count++] = idx;
  }
  pthread_mutex_unlock(&s->lock);
  return req;
}

/* ---- the queue to JavaScript ---------------------------------------------------------------- */

static void enqueue(session *s, queued *q) {
  int call = 0;
  pthread_mutex_lock(&s->lock);
  q->next = NULL;
  if (s->tail) s->tail->next = q;
  else s->head = q;
  s->tail = q;
  if (!s->scheduled) {
    s->scheduled = 1;
    call = 1;
  }
  pthread_mutex_unlock(&s->lock);
  if (call) napi_call_threadsafe_function(s->tsfn, NULL, napi_tsfn_blocking);
}

static queued *new_queued(session *s, int op, fuse_req_t req, fuse_ino_t ino) {
  queued *q = calloc(1, sizeof(queued));
  if (!q) {
    if (req) fuse_reply_err(req, ENOMEM);
    return NULL;
  }
  q->op = op;
  q->ino = ino;
  if (req) {
    q->id = slot_put(s, req);
    if (q->id < 0) {
      free(q);
      fuse_reply_err(req, EBUSY);
      return NULL;
    }
  }
  return q;
}

static char *copy_bytes(const char *p, size_t n) {
  char *c = malloc(n ? n : 1);
  if (c && n) memcpy(c, p, n);
  return c;
}

static void free_queued(queued *q) {
  free(q->name);
  free(q->name2);
  free(q->data);
  free(q);
}

#define SESSION(req) ((session *)fuse_req_userdata(req))

#define BEGIN(OP, INO)                                         \
  session *s = SESSION(req);                                   \
  queued *q = new_queued(s, OP, req, INO);                     \
  if (!q) return;

#define WITH_FI(fi)        \
  if (fi) {                \
    q->has_fh = 1;         \
    q->fh = (fi)->fh;      \
  }

/* ---- low-level operations ------------------------------------------------------------------- */

static void ll_init(void *userdata, struct fuse_conn_info *conn) {
  session *s = userdata;
  if (s->max_write) conn->max_write = s->max_write;
  if (s->max_readahead) conn->max_readahead = s->max_readahead;
  if (s->max_background) conn->max_background = s->max_background;
  if (s->congestion_threshold) conn->congestion_threshold = s->congestion_threshold;
  if (s->async_read && (conn->capable & FUSE_CAP_ASYNC_READ)) conn->want |= FUSE_CAP_ASYNC_READ;
  else conn->want &= ~FUSE_CAP_ASYNC_READ;
  if (s->writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) conn->want |= FUSE_CAP_WRITEBACK_CACHE;
  else conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA) conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  s->got_max_write = conn->max_write;
  s->got_max_readahead = conn->max_readahead;
  s->got_max_background = conn->max_background;
  s->got_writeback = (conn->want & FUSE_CAP_WRITEBACK_CACHE) != 0;
  queued *q = new_queued(s, OP_INIT, NULL, 0);
  if (q) enqueue(s, q);
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  BEGIN(OP_LOOKUP, parent);
  q->name = strdup(name);
  enqueue(s, q);
}

static void queue_forget(session *s, fuse_ino_t ino, uint64_t nlookup) {
  queued *q = new_queued(s, OP_FORGET, NULL, ino);
  if (!q) return;
  q->size = nlookup;
  enqueue(s, q);
}

static void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  session *s = SESSION(req);
  fuse_reply_none(req);
  queue_forget(s, ino, nlookup);
}

static void ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets) {
  session *s = SESSION(req);
  for (size_t i = 0; i < count; i++) queue_forget(s, forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  BEGIN(OP_GETATTR, ino);
  WITH_FI(fi);
  enqueue(s, q);
}

static double timespec_ms(const struct timespec *t) {
  return (double)t->tv_sec * 1000.0 + (double)t->tv_nsec / 1e6;
}

static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
  BEGIN(OP_SETATTR, ino);
  WITH_FI(fi);
  q->valid = to_set;
  q->mode = attr->st_mode;
  q->uid = attr->st_uid;
  q->gid = attr->st_gid;
  q->size = attr->st_size;
  q->atime_ms = timespec_ms(&attr->st_atim);
  q->mtime_ms = timespec_ms(&attr->st_mtim);
  enqueue(s, q);
}

static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
  BEGIN(OP_MKDIR, parent);
  q->name = strdup(name);
  q->mode = mode;
  enqueue(s, q);
}

static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
  BEGIN(OP_UNLINK, parent);
  q->name = strdup(name);
  enqueue(s, q);
}

static void ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) {
  BEGIN(OP_RMDIR, parent);
  q->name = strdup(name);
  enqueue(s, q);
}

static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname, unsigned int flags) {
  BEGIN(OP_RENAME, parent);
  q->name = strdup(name);
  q->ino2 = newparent;
  q->name2 = strdup(newname);
  q->flags = (int)flags;
  enqueue(s, q);
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  BEGIN(OP_OPEN, ino);
  q->flags = fi->flags;
  enqueue(s, q);
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  BEGIN(OP_READ, ino);
  WITH_FI(fi);
  q->size = size;
  q->offset = off;
  enqueue(s, q);
}

/* The writer of `fh`, with spool_lock held; NULL if the handle writes through JavaScript. */
static spool_writer *spool_find(session *s, uint64_t fh) {
  for (spool_writer *w = s->spools; w; w = w->next)
    if (w->fh == fh) return w;
  return NULL;
}

/*
 * Books a write of [off, end) for the hash (spool_lock held): extends the written prefix, or remembers
 * the range ahead of it (merged with the ranges it touches, sorted by start). 0 when the hash can no
 * longer be kept: the write lands on bytes of the prefix (which the hash thread may have read already),
 * or there are too many ranges ahead.
 */
static int spool_track(spool_writer *w, uint64_t off, uint64_t end) {
  if (off < w->written) return 0;
  if (off > w->written) {
    int i = 0;
    while (i < w->nahead && w->ahead[i].end < off) i++;
    int j = i;
    uint64_t start = off;
    while (j < w->nahead && w->ahead[j].start <= end) {
      if (w->ahead[j].start < start) start = w->ahead[j].start;
      if (w->ahead[j].end > end) end = w->ahead[j].end;
      j++;
    }
    if (j == i && w->nahead == SPOOL_AHEAD_MAX) return 0;
    memmove(&w->ahead[i + 1], &w->ahead[j], (size_t)(w->nahead - j) * sizeof(w->ahead[0]));
    w->nahead -= j - i - 1;
    w->ahead[i].start = start;
    w->ahead[i].end = end;
    return 1;
  }
  w->written = end;
  /* The prefix may now reach ranges written ahead. */
  while (w->nahead > 0 && w->ahead[0].start <= w->written) {
    if (w->ahead[0].end > w->written) w->written = w->ahead[0].end;
    memmove(&w->ahead[0], &w->ahead[1], (size_t)(w->nahead - 1) * sizeof(w->ahead[0]));
    w->nahead--;
  }
  return 1;
}

/* True while the writer's hash can still be completed. */
static int spool_hash_alive(const spool_writer *w) {
  return w->sha && !w->hash_broken;
}

/*
 * Writes `size` bytes at `off` into the spool of `fh` (spool_io held shared by the caller), books it
 * for the hash, and queues the record JavaScript does its bookkeeping from. Answers the bytes written or
 * -errno; 1 in *found when `fh` has a writer (else nothing was done). The pwrite runs outside spool_lock,
 * so writes of several reader threads (to one spool or several) go in parallel. `wait`: when the hash
 * has fallen more than SPOOL_HASH_LAG_MAX behind, wait for it before answering (reader threads only).
 */
static ssize_t spool_write(session *s, uint64_t fh, const char *buf, size_t size, off_t off, int wait, int *found) {
  pthread_mutex_lock(&s->spool_lock);
  spool_writer *w = spool_find(s, fh);
  *found = w != NULL;
  if (!w) {
    pthread_mutex_unlock(&s->spool_lock);
    return 0;
  }
  int err = w->err;
  int fd = w->fd;
  pthread_mutex_unlock(&s->spool_lock);
  if (!err) {
    size_t done = 0;
    while (done < size) {
      ssize_t n = pwrite(fd, buf + done, size - done, off + (off_t)done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        err = n < 0 ? errno : EIO;
        break;
      }
      done += (size_t)n;
    }
    /* A full disk is ENOSPC to the writer; any other failure of the local disk is EIO. */
    if (err) err = (err == ENOSPC || err == EDQUOT) ? ENOSPC : EIO;
  }
  pthread_mutex_lock(&s->spool_lock);
  /* The writer is still `fh`'s: detach and attach wait for spool_io, which the caller holds. */
  if (err && !w->err) w->err = err;
  if (!err) {
    if (spool_hash_alive(w) && size > 0) {
      uint64_t before = w->written;
      if (!spool_track(w, (uint64_t)off, (uint64_t)off + size)) w->hash_broken = 1;
      else if (w->written > before) pthread_cond_signal(&s->hash_work);
    }
    w->count++;
    if ((uint64_t)off + size > w->end) w->end = (uint64_t)off + size;
  }
  queued *q = new_queued(s, OP_WROTE, NULL, 0);
  if (q) {
    q->has_fh = 1;
    q->fh = w->fh;
    q->offset = off;
    q->size = err ? 0 : size;
    q->flags = err;
    q->ino2 = ++s->spool_seq;
    /* Queued under spool_lock: the records of one handle reach JavaScript in the order of their seq. */
    enqueue(s, q);
  }
  while (wait && spool_hash_alive(w) && w->written - w->hashed > SPOOL_HASH_LAG_MAX && !s->hasher_stop)
    pthread_cond_wait(&s->hash_progress, &s->spool_lock);
  pthread_mutex_unlock(&s->spool_lock);
  return err ? -err : (ssize_t)size;
}

static void ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
  session *ds = SESSION(req);
  if (fi) {
    int found = 0;
    pthread_rwlock_rdlock(&ds->spool_io);
    /* The record is queued before the answer: whatever the kernel sends next reaches JavaScript after it. */
    ssize_t n = spool_write(ds, fi->fh, buf, size, off, 1, &found);
    pthread_rwlock_unlock(&ds->spool_io);
    if (found) {
      if (n < 0) fuse_reply_err(req, (int)-n);
      else fuse_reply_write(req, (size_t)n);
      return;
    }
  }
  BEGIN(OP_WRITE, ino);
  WITH_FI(fi);
  q->data = copy_bytes(buf, size);
  if (!q->data) {
    slot_take(s, q->id);
    free_queued(q);
    fuse_reply_err(req, ENOMEM);
    return;
  }
  q->data_len = size;
  q->offset = off;
  enqueue(s, q);
}

static void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  BEGIN(OP_FLUSH, ino);
  WITH_FI(fi);
  enqueue(s, q);
}

static void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  BEGIN(OP_RELEASE, ino);
  WITH_FI(fi);
  enqueue(s, q);
}

static void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
  BEGIN(OP_FSYNC, ino);
  WITH_FI(fi);
  q->flags = datasync;
  enqueue(s, q);
}

static void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  BEGIN(OP_OPENDIR, ino);
  q->flags = fi->flags;
  enqueue(s, q);
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  BEGIN(OP_READDIR, ino);
  WITH_FI(fi);
  q->size = size;
  q->offset = off;
  enqueue(s, q);
}

static void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  BEGIN(OP_READDIRPLUS, ino);
  WITH_FI(fi);
  q->size = size;
  q->offset = off;
  enqueue(s, q);
}

static void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  BEGIN(OP_RELEASEDIR, ino);
  WITH_FI(fi);
  enqueue(s, q);
}

static void ll_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
  BEGIN(OP_FSYNCDIR, ino);
  WITH_FI(fi);
  q->flags = datasync;
  enqueue(s, q);
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino) {
  BEGIN(OP_STATFS, ino);
  enqueue(s, q);
}

static void ll_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size, int flags) {
  BEGIN(OP_SETXATTR, ino);
  q->name = strdup(name);
  q->data = copy_bytes(value, size);
  q->data_len = size;
  q->flags = flags;
  enqueue(s, q);
}

static void ll_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) {
  /*
   * Only `user.` attributes are stored. The others are answered here without a crossing: the kernel
   * asks for security.capability on every write(2) call, and ls -l for security.selinux and
   * system.posix_acl_access on every file.
   */
  if (strncmp(name, "user.", 5) != 0) {
    fuse_reply_err(req, EOPNOTSUPP);
    return;
  }
  BEGIN(OP_GETXATTR, ino);
  q->name = strdup(name);
  q->size = size;
  enqueue(s, q);
}

static void ll_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  BEGIN(OP_LISTXATTR, ino);
  q->size = size;
  enqueue(s, q);
}

static void ll_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name) {
  BEGIN(OP_REMOVEXATTR, ino);
  q->name = strdup(name);
  enqueue(s, q);
}

static void ll_access(fuse_req_t req, fuse_ino_t ino, int mask) {
  BEGIN(OP_ACCESS, ino);
  q->flags = mask;
  enqueue(s, q);
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
  BEGIN(OP_CREATE, parent);
  q->name = strdup(name);
  q->mode = mode;
  q->flags = fi->flags;
  enqueue(s, q);
}

/* Links, symbolic links and device nodes: the service stores none (POSIX: EPERM). */
static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev) {
  fuse_reply_err(req, EPERM);
}
static void ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name) {
  fuse_reply_err(req, EPERM);
}
static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname) {
  fuse_reply_err(req, EPERM);
}

static const struct fuse_lowlevel_ops ll_ops = {
  .init = ll_init,
  .lookup = ll_lookup,
  .forget = ll_forget,
  .forget_multi = ll_forget_multi,
  .getattr = ll_getattr,
  .setattr = ll_setattr,
  .mknod = ll_mknod,
  .mkdir = ll_mkdir,
  .unlink = ll_unlink,
  .rmdir = ll_rmdir,
  .symlink = ll_symlink,
  .rename = ll_rename,
  .link = ll_link,
  .open = ll_open,
  .read = ll_read,
  .write = ll_write,
  .flush = ll_flush,
  .release = ll_release,
  .fsync = ll_fsync,
  .opendir = ll_opendir,
  .readdir = ll_readdir,
  .readdirplus = ll_readdirplus,
  .releasedir = ll_releasedir,
  .fsyncdir = ll_fsyncdir,
  .statfs = ll_statfs,
  .setxattr = ll_setxattr,
  .getxattr = ll_getxattr,
  .listxattr = ll_listxattr,
  .removexattr = ll_removexattr,
  .access = ll_access,
  .create = ll_create,
};

/* ---- reader threads ------------------------------------------------------------------------- */

static void *reader_main(void *arg) {
  session *s = arg;
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
    queued *q = new_queued(s, OP_END, NULL, 0);
    if (q) enqueue(s, q);
  }
  return NULL;
}

/* ---- N-API helpers --------------------------------------------------------------------------- */

#define NAPI_CALL(env, call)                                          \
  do {                                                                \
    if ((call) != napi_ok) {                                          \
      const napi_extended_error_info *info = NULL;                    \
      napi_get_last_error_info((env), &info);                         \
      napi_throw_error((env), NULL, info && info->error_message ? info->error_message : #call); \
      return NULL;                                                    \
    }                                                                 \
  } while (0)

static void set_num(napi_env env, napi_value obj, const char *key, double v) {
  napi_value n;
  napi_create_double(env, v, &n);
  napi_set_named_property(env, obj, key, n);
}

static void set_str(napi_env env, napi_value obj, const char *key, const char *v) {
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

static napi_value request_object(napi_env env, session *s, queued *q) {
  napi_value o;
  napi_create_object(env, &o);
  set_num(env, o, "op", q->op);
  set_num(env, o, "id", q->id);
  set_num(env, o, "ino", (double)q->ino);
  if (q->has_fh) set_num(env, o, "fh", (double)q->fh);
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
      break;
    case OP_MKDIR:
    case OP_CREATE:
      set_num(env, o, "mode", q->mode);
      set_num(env, o, "flags", q->flags);
      break;
    case OP_OPEN:
    case OP_OPENDIR:
    case OP_FSYNC:
    case OP_FSYNCDIR:
    case OP_ACCESS:
      set_num(env, o, "flags", q->flags);
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
    case OP_SETXATTR: {
      set_num(env, o, "flags", q->flags);
      napi_value buf;
      if (napi_create_external_buffer(env, q->data_len, q->data, free_data, (void *)(uintptr_t)q->data_len, &buf) == napi_ok) {
        /* The Buffer owns it now; V8 counts it, so garbage collection keeps up with the data rate. */
        int64_t ignored;
        napi_adjust_external_memory(env, (int64_t)q->data_len, &ignored);
        q->data = NULL;
      } else {
        napi_create_buffer_copy(env, q->data_len, q->data, NULL, &buf);
      }
      napi_set_named_property(env, o, "data", buf);
      break;
    }
    default:
      break;
  }
  set_str(env, o, "name", q->name);
  return o;
}

/* Runs on the main thread: hands everything queued so far to JavaScript in one call. */
static void call_js(napi_env env, napi_value js_cb, void *context, void *data) {
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
  napi_value batch;
  napi_create_array(env, &batch);
  uint32_t i = 0;
  while (q) {
    queued *next = q->next;
    napi_set_element(env, batch, i++, request_object(env, s, q));
    free_queued(q);
    q = next;
  }
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  napi_call_function(env, undefined, js_cb, 1, &batch, NULL);
}

static session *get_session(napi_env env, napi_value v) {
  session *s = NULL;
  if (napi_get_value_external(env, v, (void **)&s) != napi_ok || !s) {
    napi_throw_type_error(env, NULL, "expected a FUSE session");
    return NULL;
  }
  return s;
}

static int get_u32_prop(napi_env env, napi_value obj, const char *key, unsigned *out) {
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

static char *get_string(napi_env env, napi_value v) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) return NULL;
  char *str = malloc(len + 1);
  if (!str) return NULL;
  napi_get_value_string_utf8(env, v, str, len + 1, &len);
  return str;
}

/* ---- exported functions ---------------------------------------------------------------------- */

/* mount(mountpoint, options: string[], settings, onBatch) → session */
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
  pthread_cond_init(&s->hash_work, NULL);
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
  get_u32_prop(env, argv[2], "readers", &readers);
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
  s->se = fuse_session_new(&fargs, &ll_ops, sizeof(ll_ops), s);
  fuse_opt_free_args(&fargs);
  for (uint32_t i = 0; i <= nopt; i++) free(args[i]);
  free(args);
  if (!s->se) {
    free(s->mountpoint);
    free(s);
    napi_throw_error(env, NULL, "fuse_session_new failed (bad mount options)");
    return NULL;
  }
  if (fuse_session_mount(s->se, s->mountpoint) != 0) {
    fuse_session_destroy(s->se);
    free(s->mountpoint);
    free(s);
    napi_throw_error(env, NULL, "fuse_session_mount failed (see stderr)");
    return NULL;
  }

  napi_value name;
  napi_create_string_utf8(env, "fuse3-requests", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[3], NULL, name, 0, 1, NULL, NULL, s, call_js, &s->tsfn) != napi_ok) {
    fuse_session_unmount(s->se);
    fuse_session_destroy(s->se);
    free(s->mountpoint);
    free(s);
    napi_throw_error(env, NULL, "cannot create the request queue");
    return NULL;
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
  /* Without the hash thread, direct writes keep no hash (the seal hashes the spool). */
  s->hasher_started = s->reader_count > 0 && pthread_create(&s->hasher, NULL, hasher_main, s) == 0;
  if (s->reader_count == 0) {
    napi_release_threadsafe_function(s->tsfn, napi_tsfn_abort);
    fuse_session_unmount(s->se);
    fuse_session_destroy(s->se);
    free(s->mountpoint);
    free(s);
    napi_throw_error(env, NULL, "cannot start a reader thread");
    return NULL;
  }
  napi_value ext;
  NAPI_CALL(env, napi_create_external(env, s, NULL, NULL, &ext));
  return ext;
}

static napi_value bool_value(napi_env env, int b) {
  napi_value v;
  napi_get_boolean(env, b, &v);
  return v;
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
  size_t argc = 1;
  napi_value argv[1];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  session *s = get_session(env, argv[0]);
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
  size_t argc = 1;
  napi_value argv[1];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  session *s = get_session(env, argv[0]);
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
  fuse_session_destroy(s->se);
  s->se = NULL;
  /* The session record itself stays: the external may still be referenced from JavaScript. */
  return bool_value(env, 1);
}

static int arg_request(napi_env env, napi_callback_info info, size_t want, napi_value *argv, session **s, fuse_req_t *req) {
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
  *req = slot_take(*s, id);
  return 1;
}

/* Reads a stat record: Float64Array [ino, mode, nlink, uid, gid, size, blocks, blksize, atimeMs, mtimeMs, ctimeMs]. */
/* The 11 stat fields JavaScript sends (ino, mode, nlink, uid, gid, size, blocks, blksize, atime, mtime, ctime in ms). */
static void stat_from_fields(const double *f, struct stat *st) {
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

static int get_stat(napi_env env, napi_value arr, struct stat *st) {
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

static double get_double(napi_env env, napi_value v) {
  double d = 0;
  napi_get_value_double(env, v, &d);
  return d;
}

/* replyErr(session, id, errno) → whether the request was still pending. errno 0 = success without data. */
static napi_value js_reply_err(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  session *s;
  fuse_req_t req;
  if (!arg_request(env, info, 3, argv, &s, &req)) return NULL;
  if (!req) return bool_value(env, 0);
  fuse_reply_err(req, (int)get_double(env, argv[2]));
  return bool_value(env, 1);
}

/* replyEntry(session, id, stat, entryTimeoutS, attrTimeoutS) */
static napi_value js_reply_entry(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  session *s;
  fuse_req_t req;
  if (!arg_request(env, info, 5, argv, &s, &req)) return NULL;
  if (!req) return bool_value(env, 0);
  struct fuse_entry_param e;
  memset(&e, 0, sizeof(e));
  if (!get_stat(env, argv[2], &e.attr)) {
    fuse_reply_err(req, EIO);
    return NULL;
  }
  e.ino = e.attr.st_ino;
  e.generation = 1;
  e.entry_timeout = get_double(env, argv[3]);
  e.attr_timeout = get_double(env, argv[4]);
  fuse_reply_entry(req, &e);
  return bool_value(env, 1);
}

/* replyNegative(session, id, timeoutS): "no such entry", remembered by the kernel for timeoutS. */
static napi_value js_reply_negative(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  session *s;
  fuse_req_t req;
  if (!arg_request(env, info, 3, argv, &s, &req)) return NULL;
  if (!req) return bool_value(env, 0);
  struct fuse_entry_param e;
  memset(&e, 0, sizeof(e));
  e.entry_timeout = get_double(env, argv[2]);
  fuse_reply_entry(req, &e);
  return bool_value(env, 1);
}

/* replyAttr(session, id, stat, attrTimeoutS) */
static napi_value js_reply_attr(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  session *s;
  fuse_req_t req;
  if (!arg_request(env, info, 4, argv, &s, &req)) return NULL;
  if (!req) return bool_value(env, 0);
  struct stat st;
  if (!get_stat(env, argv[2], &st)) {
    fuse_reply_err(req, EIO);
    return NULL;
  }
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
static napi_value js_reply_open(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  session *s;
  fuse_req_t req;
  if (!arg_request(env, info, 4, argv, &s, &req)) return NULL;
  if (!req) return bool_value(env, 0);
  struct fuse_file_info fi;
  fill_fi(&fi, get_double(env, argv[2]), (int)get_double(env, argv[3]));
  if (fuse_reply_open(req, &fi) == -ENOENT) return bool_value(env, 0); /* interrupted: the kernel releases nothing */
  return bool_value(env, 1);
}

/* replyCreate(session, id, stat, entryTimeoutS, attrTimeoutS, fh, flags) */
static napi_value js_reply_create(napi_env env, napi_callback_info info) {
  napi_value argv[7];
  session *s;
  fuse_req_t req;
  if (!arg_request(env, info, 7, argv, &s, &req)) return NULL;
  if (!req) return bool_value(env, 0);
  struct fuse_entry_param e;
  memset(&e, 0, sizeof(e));
  if (!get_stat(env, argv[2], &e.attr)) {
    fuse_reply_err(req, EIO);
    return NULL;
  }
  e.ino = e.attr.st_ino;
  e.generation = 1;
  e.entry_timeout = get_double(env, argv[3]);
  e.attr_timeout = get_double(env, argv[4]);
  struct fuse_file_info fi;
  fill_fi(&fi, get_double(env, argv[5]), (int)get_double(env, argv[6]));
  if (fuse_reply_create(req, &e, &fi) == -ENOENT) return bool_value(env, 0);
  return bool_value(env, 1);
}

/* replyWrite(session, id, count) */
static napi_value js_reply_write(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  session *s;
  fuse_req_t req;
  if (!arg_request(env, info, 3, argv, &s, &req)) return NULL;
  if (!req) return bool_value(env, 0);
  fuse_reply_write(req, (size_t)get_double(env, argv[2]));
  return bool_value(env, 1);
}

/* replyXattrSize(session, id, size) */
static napi_value js_reply_xattr(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  session *s;
  fuse_req_t req;
  if (!arg_request(env, info, 3, argv, &s, &req)) return NULL;
  if (!req) return bool_value(env, 0);
  fuse_reply_xattr(req, (size_t)get_double(env, argv[2]));
  return bool_value(env, 1);
}

/* replyData(session, id, buffers: Buffer[], limit): the buffers in order, at most `limit` bytes in all. */
static napi_value js_reply_data(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  session *s;
  fuse_req_t req;
  if (!arg_request(env, info, 4, argv, &s, &req)) return NULL;
  if (!req) return bool_value(env, 0);
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
static napi_value js_reply_dir(napi_env env, napi_callback_info info) {
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
static napi_value js_reply_dir_plus(napi_env env, napi_callback_info info) {
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
static napi_value js_reply_statfs(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  session *s;
  fuse_req_t req;
  if (!arg_request(env, info, 3, argv, &s, &req)) return NULL;
  if (!req) return bool_value(env, 0);
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

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  session *s;
  fuse_ino_t parent;
  char *name;
  int rc;
} notify_job;

static void notify_execute(napi_env env, void *data) {
  notify_job *job = data;
  session *s = job->s;
  pthread_mutex_lock(&s->lock);
  int closed = s->closed;
  if (!closed) s->notifying++;
  pthread_mutex_unlock(&s->lock);
  if (closed) {
    job->rc = -ENOTCONN;
    return;
  }
  job->rc = fuse_lowlevel_notify_inval_entry(s->se, job->parent, job->name, strlen(job->name));
  pthread_mutex_lock(&s->lock);
  s->notifying--;
  pthread_mutex_unlock(&s->lock);
}

static void notify_complete(napi_env env, napi_status status, void *data) {
  notify_job *job = data;
  napi_value rc;
  napi_create_int32(env, job->rc, &rc);
  napi_resolve_deferred(env, job->deferred, rc);
  napi_delete_async_work(env, job->work);
  free(job->name);
  free(job);
}

/*
 * invalidateEntry(session, parentIno, name) → Promise<rc>: the kernel forgets a name it cached (its
 * file changed elsewhere), so the next path walk looks it up again. Runs off the main thread: the
 * kernel may have to wait for a request on that folder that only the main thread answers.
 */
static napi_value js_invalidate_entry(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  notify_job *job = calloc(1, sizeof(notify_job));
  if (!job) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  job->s = s;
  job->parent = (fuse_ino_t)get_double(env, argv[1]);
  job->name = get_string(env, argv[2]);
  napi_value promise, name;
  NAPI_CALL(env, napi_create_promise(env, &job->deferred, &promise));
  napi_create_string_utf8(env, "fuse3-notify", NAPI_AUTO_LENGTH, &name);
  NAPI_CALL(env, napi_create_async_work(env, NULL, name, notify_execute, notify_complete, job, &job->work));
  NAPI_CALL(env, napi_queue_async_work(env, job->work));
  return promise;
}

/* ---- direct spool writes ---------------------------------------------------------------------- */

static void spool_free(spool_writer *w) {
  if (w->sha) EVP_MD_CTX_free(w->sha);
  if (w->fd >= 0) close(w->fd);
  free(w);
}

/* Removes the writer of `fh` from the list (spool_lock held) and returns it; NULL if there is none. */
static spool_writer *spool_unlink(session *s, uint64_t fh) {
  for (spool_writer **p = &s->spools; *p; p = &(*p)->next) {
    if ((*p)->fh == fh) {
      spool_writer *w = *p;
      *p = w->next;
      return w;
    }
  }
  return NULL;
}

/*
 * Done with a writer taken off the list (spool_lock held): freed now, or, while the hash thread reads it
 * or its hash is still to be finished (`token` > 0), handed to the hash thread, which frees it.
 */
static void spool_retire(session *s, spool_writer *w) {
  if (!w->hashing && w->token == 0) {
    spool_free(w);
    return;
  }
  if (w->token == 0) w->hash_broken = 1;
  w->next = s->finishing;
  s->finishing = w;
  pthread_cond_signal(&s->hash_work);
}

/* The hex SHA-1 of a finished hash into hex[41]; 0 when it cannot be had. */
static int spool_digest(spool_writer *w, char *hex) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!w->sha || EVP_DigestFinal_ex(w->sha, md, &len) != 1 || len != 20) return 0;
  static const char digits[] = "0123456789abcdef";
  for (unsigned i = 0; i < len; i++) {
    hex[i * 2] = digits[md[i] >> 4];
    hex[i * 2 + 1] = digits[md[i] & 15];
  }
  hex[40] = 0;
  return 1;
}

/* Reports a detached writer's finished hash (HASHED record: token, hashed bytes, sha1 or none) and frees it. */
static void spool_report(session *s, spool_writer *w) {
  char hex[41];
  if (w->token > 0) {
    queued *q = new_queued(s, OP_HASHED, NULL, 0);
    if (q) {
      q->ino2 = w->token;
      q->has_fh = 1;
      q->fh = w->fh;
      q->size = w->hashed;
      if (!w->hash_broken && w->hashed == w->written && spool_digest(w, hex)) q->name = copy_bytes(hex, 41);
      enqueue(s, q);
    }
  }
  spool_free(w);
}

/* A writer with bytes to hash (spool_lock held), detached ones first: their close waits for it. */
static spool_writer *hash_next(session *s) {
  for (spool_writer *w = s->finishing; w; w = w->next)
    if (!w->hashing && spool_hash_alive(w) && w->hashed < w->written) return w;
  for (spool_writer *w = s->spools; w; w = w->next)
    if (!w->hashing && spool_hash_alive(w) && w->hashed < w->written) return w;
  return NULL;
}

/* A detached writer with nothing left to hash, taken off `finishing` (spool_lock held). */
static spool_writer *hash_finished(session *s) {
  for (spool_writer **p = &s->finishing; *p; p = &(*p)->next) {
    spool_writer *w = *p;
    if (!w->hashing && (!spool_hash_alive(w) || w->hashed >= w->written)) {
      *p = w->next;
      return w;
    }
  }
  return NULL;
}

/*
 * The hash thread: reads each writer's written prefix back from its spool (from the page cache: the
 * bytes were just written) and keeps its SHA-1, so the reader threads answer the kernel as soon as their
 * pwrite is done. Finishes the hashes of detached writers and reports them.
 */
static void *hasher_main(void *arg) {
  session *s = arg;
  char *chunk = malloc(SPOOL_HASH_CHUNK);
  pthread_mutex_lock(&s->spool_lock);
  while (!s->hasher_stop) {
    spool_writer *w = chunk ? hash_next(s) : NULL;
    if (w) {
      uint64_t from = w->hashed;
      size_t n = w->written - from < SPOOL_HASH_CHUNK ? (size_t)(w->written - from) : SPOOL_HASH_CHUNK;
      w->hashing = 1;
      pthread_mutex_unlock(&s->spool_lock);
      ssize_t got;
      do got = pread(w->fd, chunk, n, (off_t)from);
      while (got < 0 && errno == EINTR);
      int ok = got > 0 && EVP_DigestUpdate(w->sha, chunk, (size_t)got) == 1;
      pthread_mutex_lock(&s->spool_lock);
      w->hashing = 0;
      if (ok) w->hashed += (uint64_t)got;
      else w->hash_broken = 1;
      pthread_cond_broadcast(&s->hash_progress);
      continue;
    }
    spool_writer *done = hash_finished(s);
    if (done) {
      pthread_mutex_unlock(&s->spool_lock);
      spool_report(s, done);
      pthread_mutex_lock(&s->spool_lock);
      continue;
    }
    pthread_cond_wait(&s->hash_work, &s->spool_lock);
  }
  pthread_mutex_unlock(&s->spool_lock);
  free(chunk);
  return NULL;
}

/* Stops the hash thread (after the readers: none waits for it any more) and frees every writer. */
static void stop_hasher(session *s) {
  pthread_mutex_lock(&s->spool_lock);
  s->hasher_stop = 1;
  pthread_cond_broadcast(&s->hash_work);
  pthread_cond_broadcast(&s->hash_progress);
  pthread_mutex_unlock(&s->spool_lock);
  if (s->hasher_started) pthread_join(s->hasher, NULL);
  s->hasher_started = 0;
  pthread_mutex_lock(&s->spool_lock);
  while (s->spools) {
    spool_writer *w = s->spools;
    s->spools = w->next;
    spool_free(w);
  }
  while (s->finishing) {
    spool_writer *w = s->finishing;
    s->finishing = w->next;
    spool_free(w);
  }
  pthread_mutex_unlock(&s->spool_lock);
}

/*
 * spoolAttach(session, fh, fd, hashFrom) → seq: from now on the writes of `fh` go into the file `fd`
 * (which stays JavaScript's: the engine writes through a duplicate of it, and JavaScript must call
 * spoolDetach before closing it). hashFrom >= 0: the spool's first hashFrom bytes are all there is and
 * were written front to back; the hash thread reads them back and hashes them, and goes on with each
 * write that continues them. -1: no hash kept. Records of this attachment's writes carry a `seq` above
 * the number answered.
 */
static napi_value js_spool_attach(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 4) {
    napi_throw_type_error(env, NULL, "spoolAttach(session, fh, fd, hashFrom)");
    return NULL;
  }
  session *s = get_session(env, argv[0]);
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
    if (w->sha && EVP_DigestInit_ex(w->sha, EVP_sha1(), NULL) != 1) {
      EVP_MD_CTX_free(w->sha);
      w->sha = NULL;
    }
    w->written = (uint64_t)from;
  }
  w->end = w->written;
  pthread_rwlock_wrlock(&s->spool_io);
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
static napi_value js_spool_detach(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 2) {
    napi_throw_type_error(env, NULL, "spoolDetach(session, fh)");
    return NULL;
  }
  session *s = get_session(env, argv[0]);
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
static napi_value js_spool_write(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 4) {
    napi_throw_type_error(env, NULL, "spoolWrite(session, fh, data, offset)");
    return NULL;
  }
  session *s = get_session(env, argv[0]);
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
  ssize_t n = spool_write(s, (uint64_t)get_double(env, argv[1]), data, len, (off_t)off, 0, &found);
  pthread_rwlock_unlock(&s->spool_io);
  if (!found) napi_get_undefined(env, &result);
  else napi_create_double(env, (double)n, &result);
  return result;
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
    { "replyWrite", js_reply_write },
    { "replyXattrSize", js_reply_xattr },
    { "replyData", js_reply_data },
    { "replyDir", js_reply_dir },
    { "replyDirPlus", js_reply_dir_plus },
    { "replyStatfs", js_reply_statfs },
    { "invalidateEntry", js_invalidate_entry },
    { "spoolAttach", js_spool_attach },
    { "spoolDetach", js_spool_detach },
    { "spoolWrite", js_spool_write },
  };
  for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
    napi_value f;
    napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f);
    napi_set_named_property(env, exports, fns[i].name, f);
  }
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
