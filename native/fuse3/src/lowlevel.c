/*
 * The low-level operations libfuse runs on the reader threads (ll_ops): each request queued for
 * JavaScript, or answered here from what the engine keeps.
 */
#include "engine_i.h"

#define BEGIN(OP, INO)                                         \
  session *s = SESSION(req);                                   \
  queued *q = new_queued(s, OP, req, INO);                     \
  if (!q) return;

/* A request that may change the attributes of CHANGE (and CHANGE2). */
#define BEGIN_CHANGE(OP, INO, CHANGE, CHANGE2)                         \
  session *s = SESSION(req);                                           \
  queued *q = new_queued_changing(s, OP, req, INO, CHANGE, CHANGE2);   \
  if (!q) return;

/* A request that may add NAME to folder FOLDER (and change the attributes of CHANGE, CHANGE2). */
#define BEGIN_NAMING(OP, INO, CHANGE, CHANGE2, FOLDER, NAME)                            \
  session *s = SESSION(req);                                                           \
  queued *q = new_queued_naming(s, OP, req, INO, CHANGE, CHANGE2, FOLDER, NAME);       \
  if (!q) return;

#define WITH_FI(fi)        \
  if (fi) {                \
    q->has_fh = 1;         \
    q->fh = (fi)->fh;      \
  }

/* ---- low-level operations ------------------------------------------------------------------- */

void ll_init(void *userdata, struct fuse_conn_info *conn) {
  session *s = userdata;
  if (s->max_write) conn->max_write = s->max_write;
  if (s->max_readahead) conn->max_readahead = s->max_readahead;
  if (s->max_background) conn->max_background = s->max_background;
  if (s->congestion_threshold) conn->congestion_threshold = s->congestion_threshold;
  if (s->async_read && (conn->capable & FUSE_CAP_ASYNC_READ)) conn->want |= FUSE_CAP_ASYNC_READ;
  else conn->want &= ~FUSE_CAP_ASYNC_READ;
  /* The kernel grants passthrough only to a connection without the writeback cache. */
  int passthrough = s->passthrough_want && rings_passthrough_offered(s->rings);
  if (passthrough) rings_ask_passthrough(s->rings);
  if (s->writeback && !passthrough && (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) conn->want |= FUSE_CAP_WRITEBACK_CACHE;
  else conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA) conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  s->got_max_write = conn->max_write;
  s->got_max_readahead = conn->max_readahead;
  s->got_max_background = conn->max_background;
  s->got_writeback = (conn->want & FUSE_CAP_WRITEBACK_CACHE) != 0;
  rings_prepare(s->rings, conn->max_write);
  /* Queued once the kernel has taken the answer (init_answered): JavaScript then knows the session's
   * settings are in force (a read-ahead window set before would be cut back to max_readahead by it). */
  s->init_record = new_queued(s, OP_INIT, NULL, 0);
}

void init_answered(void *arg) {
  session *s = arg;
  queued *q = s->init_record;
  s->init_record = NULL;
  if (q) enqueue(s, q);
}

/* A lookup in a folder whose names are all known here, of a name it does not hold: no such entry. */
static int answer_negative(fuse_req_t req, fuse_ino_t parent, const char *name) {
  session *s = SESSION(req);
  if (!s->names || !name_answerable(s, name)) return 0;
  double left = 0;
  pthread_mutex_lock(&s->lock);
  name_set *n = names_find(s, parent);
  if (n) {
    left = n->expires - now_s();
    if (left <= 0) names_drop(s, parent);
    else if (names_holds(n, name)) left = 0;
    else s->lookups_answered++;
  }
  pthread_mutex_unlock(&s->lock);
  if (left <= 0) return 0;
  struct fuse_entry_param e;
  memset(&e, 0, sizeof(e));
  e.entry_timeout = left;
  fuse_reply_entry(req, &e);
  return 1;
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  if (answer_negative(req, parent, name)) return;
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
  pthread_mutex_lock(&s->lock);
  attr_drop(s, ino);
  names_drop(s, ino);
  pthread_mutex_unlock(&s->lock);
  fuse_reply_none(req);
  queue_forget(s, ino, nlookup);
}

static void ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets) {
  session *s = SESSION(req);
  pthread_mutex_lock(&s->lock);
  for (size_t i = 0; i < count; i++) {
    attr_drop(s, forgets[i].ino);
    names_drop(s, forgets[i].ino);
  }
  pthread_mutex_unlock(&s->lock);
  for (size_t i = 0; i < count; i++) queue_forget(s, forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  struct stat cached;
  double left;
  if (attr_cached(SESSION(req), ino, &cached, &left)) {
    fuse_reply_attr(req, &cached, left);
    return;
  }
  BEGIN(OP_GETATTR, ino);
  WITH_FI(fi);
  enqueue(s, q);
}

double timespec_ms(const struct timespec *t) {
  return (double)t->tv_sec * 1000.0 + (double)t->tv_nsec / 1e6;
}

static int answer_times(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi);
static int answer_mode(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi);

static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
  if (to_set & FUSE_SET_ATTR_SIZE) created_spoil(SESSION(req), ino);
  if (answer_times(req, ino, attr, to_set, fi)) return;
  if (answer_mode(req, ino, attr, to_set, fi)) return;
  BEGIN_CHANGE(OP_SETATTR, ino, ino, 0);
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

static int timespec_before(const struct timespec *a, const struct timespec *b) {
  return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/*
 * Answered here: with the writeback cache the kernel writes back a file's times (at close, through an
 * open handle) as a setattr of mtime (and ctime). When the file's attributes are cached, it is answered
 * from them with the new times (JavaScript sets atime and mtime to the mtime) and its record goes to
 * JavaScript, which applies it before anything the kernel sends afterwards.
 */
static int answer_times(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
  session *s = SESSION(req);
  const int times = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_CTIME;
  if (!s->answer_small || !s->got_writeback || !s->attrs || !fi || !(to_set & FUSE_SET_ATTR_MTIME) || (to_set & ~times)) return 0;
  queued *q = new_queued(s, OP_SETATTR, NULL, ino);
  if (!q) return 0;
  struct stat st;
  double left = 0;
  int hit = 0;
  pthread_mutex_lock(&s->lock);
  attr_entry *e = attr_find(s, ino, 0);
  if (e && e->valid && e->inflight == 0) {
    left = e->expires - now_s();
    if (left > 0) {
      hit = 1;
      e->st.st_mtim = attr->st_mtim;
      e->st.st_atim = attr->st_mtim;
      if (timespec_before(&e->st.st_ctim, &attr->st_mtim)) e->st.st_ctim = attr->st_mtim;
      /*
       * The ctime JavaScript will show is not known here; but with the writeback cache the kernel keeps its
       * own size, mtime and ctime of a regular file it holds and takes them from no answer
       * (fuse_change_attributes, the inode's cache mask): the getattrs that follow are answered from these
       * (`cp FILES DIR` stats every file it closed). JavaScript notes what the kernel shows when it applies
       * this (the base a change made elsewhere is told from).
       */
      e->times_known = 1;
      e->changed = ++s->epoch;
      st = e->st;
      s->times_answered++;
    }
  }
  pthread_mutex_unlock(&s->lock);
  if (!hit) {
    free_queued(q);
    return 0;
  }
  q->has_fh = 1;
  q->fh = fi->fh;
  q->valid = to_set;
  q->atime_ms = timespec_ms(&attr->st_atim);
  q->mtime_ms = timespec_ms(&attr->st_mtim);
  q->answered = 1;
  enqueue_quiet(s, q);
  fuse_reply_attr(req, &st, left);
  return 1;
}

/*
 * Answered here: a mode set on a file handed to the kernel (passthrough) while the kernel writes it
 * (rsync and `cp -a` set it on the open file before they close it; an fchmod comes without its handle).
 * Answered with the file's attributes (the spool's size and times, as a getattr of it is) and the new
 * mode; its record goes to JavaScript, which keeps the mode as for any chmod, before anything the kernel
 * sends afterwards about the file.
 */
static int answer_mode(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
  session *s = SESSION(req);
  if (!s->answer_small || !s->attrs || !(to_set & FUSE_SET_ATTR_MODE) || (to_set & ~(FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_CTIME))) return 0;
  queued *q = new_queued(s, OP_SETATTR, NULL, ino);
  if (!q) return 0;
  struct stat st;
  pthread_mutex_lock(&s->lock);
  attr_entry *e = attr_find(s, ino, 0);
  int hit = attr_live(e, &st);
  if (hit) {
    e->st.st_mode = (e->st.st_mode & S_IFMT) | (attr->st_mode & 07777);
    st.st_mode = e->st.st_mode;
    s->modes_answered++;
  }
  pthread_mutex_unlock(&s->lock);
  if (!hit) {
    free_queued(q);
    return 0;
  }
  WITH_FI(fi);
  q->valid = to_set;
  q->mode = attr->st_mode;
  q->answered = 1;
  enqueue_quiet(s, q);
  /* Valid this once, as a getattr answered from the spool: the kernel writes it on. */
  fuse_reply_attr(req, &st, 0);
  return 1;
}

static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
  BEGIN_NAMING(OP_MKDIR, parent, parent, 0, parent, name);
  q->name = strdup(name);
  q->mode = mode;
  enqueue(s, q);
}

static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
  created_unlinked(SESSION(req), parent, name);
  BEGIN_CHANGE(OP_UNLINK, parent, parent, 0);
  q->name = strdup(name);
  enqueue(s, q);
}

static void ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) {
  BEGIN_CHANGE(OP_RMDIR, parent, parent, 0);
  q->name = strdup(name);
  enqueue(s, q);
}

static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname, unsigned int flags) {
  uint64_t epoch = paths_changed(SESSION(req), parent, name, newparent, newname);
  BEGIN_NAMING(OP_RENAME, parent, parent, newparent, newparent, newname);
  q->name = strdup(name);
  q->ino2 = newparent;
  q->name2 = strdup(newname);
  q->flags = (int)flags;
  q->size = epoch;
  enqueue(s, q);
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) created_spoil(SESSION(req), ino);
  BEGIN_CHANGE(OP_OPEN, ino, (fi->flags & O_TRUNC) ? ino : 0, 0);
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

/*
 * Answered here: with the writeback cache, a write that ends within a small file's first 64 KiB (what
 * the Vfs holds in memory) is answered at once. Its record (the data, marked answered) is queued before
 * the answer, so JavaScript applies it ahead of anything the kernel sends afterwards; an error it gets
 * doing so is answered by the handle's next flush or fsync, as for the writeback cache's own writes.
 */
static int answer_write(session *s, fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
  if (!s->answer_small || !s->got_writeback || !fi || off < 0 || (uint64_t)off + size > ANSWERED_WRITE_END) return 0;
  queued *q = new_queued(s, OP_WRITE, NULL, ino);
  if (!q) return 0;
  q->data = copy_bytes(buf, size);
  int room = 0;
  pthread_mutex_lock(&s->lock);
  if (q->data && s->answered_bytes + size <= ANSWERED_BYTES_MAX) {
    room = 1;
    s->answered_bytes += size;
    attr_entry *e = attr_find(s, ino, 0);
    if (e) {
      /* The size JavaScript will show is known; its times are not (until the kernel sets them). */
      off_t end = off + (off_t)size;
      if (e->valid && end > e->st.st_size) {
        e->st.st_size = end;
        e->st.st_blocks = (end + 511) / 512;
      }
      e->times_known = 0;
      e->changed = ++s->epoch;
    }
    s->writes_answered++;
    /* Followed for its close when the file was created here; another writer of such a file spoils it. */
    created_file *c = created_find(s, fi->fh);
    if (c) created_write(s, c, buf, size, off);
    else
      for (c = s->created; c; c = c->next)
        if (c->ino == ino) c->spoiled = 1;
  }
  pthread_mutex_unlock(&s->lock);
  if (!room) {
    free_queued(q);
    return 0;
  }
  q->has_fh = 1;
  q->fh = fi->fh;
  q->data_len = size;
  q->offset = off;
  q->answered = 1;
  enqueue_quiet(s, q);
  fuse_reply_write(req, size);
  return 1;
}

static void ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
  session *ds = SESSION(req);
  if (fi) {
    int found = 0;
    /* A write into the spool changes the file's size and times: the attributes kept of it are stale. */
    pthread_mutex_lock(&ds->spool_lock);
    int direct = spool_find(ds, fi->fh) != NULL;
    pthread_mutex_unlock(&ds->spool_lock);
    if (direct) {
      pthread_mutex_lock(&ds->lock);
      attr_changing(ds, ino, 0);
      pthread_mutex_unlock(&ds->lock);
      created_spoil(ds, ino);
    }
    pthread_rwlock_rdlock(&ds->spool_io);
    /* The record is queued before the answer: whatever the kernel sends next reaches JavaScript after it. */
    ssize_t n = spool_write(ds, fi->fh, buf, size, off, &found);
    /*
     * A handle without a spool: the engine may answer the write, its record queued under spool_io, so
     * that spoolAttach sees it (it attaches no spool while such a record waits: the engine's own writes
     * into the spool would land before it).
     */
    int answered = !found && answer_write(ds, req, ino, buf, size, off, fi);
    pthread_rwlock_unlock(&ds->spool_io);
    if (found) {
      /* The hash bounds how far it falls behind: the answer waits for it, spool_io let go. */
      if (n > 0) spool_wait_hash(ds, fi->fh);
      if (n < 0) fuse_reply_err(req, (int)-n);
      else fuse_reply_write(req, (size_t)n);
      return;
    }
    if (answered) return;
  }
  created_spoil(ds, ino);
  BEGIN_CHANGE(OP_WRITE, ino, ino, 0);
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
  if (answer_flush(SESSION(req), req, ino, fi)) return;
  BEGIN(OP_FLUSH, ino);
  WITH_FI(fi);
  enqueue(s, q);
}

/*
 * A release of a file or folder (`op`). The kernel sends it without waiting for it (nothing of its answer
 * reaches the application): answered here, JavaScript releasing the handle behind, so no release waits
 * for JavaScript (over io_uring, one waiting would hold a ring's buffer). Queued before the answer: the
 * kernel's forget of the inode comes after it. `quiet`: queued without waking JavaScript (ll_release).
 */
static void answer_release(fuse_req_t req, int op, fuse_ino_t ino, struct fuse_file_info *fi, int quiet) {
  session *s = SESSION(req);
  queued *q = new_queued(s, op, NULL, ino);
  if (q) {
    WITH_FI(fi);
    q->answered = 1;
    if (quiet) enqueue_quiet(s, q);
    else enqueue(s, q);
  }
  fuse_reply_err(req, 0);
}

static void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  int quiet = 0;
  if (fi && fi->fh >= CREATED_FH_BASE) {
    session *cs = SESSION(req);
    pthread_mutex_lock(&cs->lock);
    /* Closed without a flush answered here: nothing of it is followed any longer. */
    created_file *c = created_take(cs, fi->fh);
    /*
     * The release of a file whose close the engine answered, that close's record the last one queued:
     * it joins it (and the create's) quietly, so that a burst of such files reaches JavaScript in a few
     * large batches (with the next request, by the QUIET_RECORDS_MS poll, or once the records waiting
     * pass half of ANSWERED_BYTES_MAX), not one file at a time beside the application.
     */
    queued *last = cs->tail;
    quiet = !c && last && last->op == OP_FLUSH && last->answered && last->has_fh && last->fh == fi->fh && cs->answered_bytes < ANSWERED_BYTES_MAX / 2;
    pthread_mutex_unlock(&cs->lock);
    created_free(c);
  }
  answer_release(req, OP_RELEASE, ino, fi, quiet);
}

static void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
  /* JavaScript makes it durable (and so journals it): its close is JavaScript's too. */
  created_spoil(SESSION(req), ino);
  BEGIN(OP_FSYNC, ino);
  WITH_FI(fi);
  q->flags = datasync;
  enqueue(s, q);
}

/*
 * fallocate: mode 0 (allocate, extending the file with zeros up to offset + length) is JavaScript's, as a
 * truncate that only grows; the others (keep the size, punch or zero a range, collapse, insert) the Vfs
 * cannot hold, and are answered EOPNOTSUPP here.
 */
static void ll_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length, struct fuse_file_info *fi) {
  if (mode != 0) {
    fuse_reply_err(req, EOPNOTSUPP);
    return;
  }
  /* A size changed by JavaScript: its close is JavaScript's too. */
  created_spoil(SESSION(req), ino);
  BEGIN_CHANGE(OP_FALLOCATE, ino, ino, 0);
  WITH_FI(fi);
  q->offset = (uint64_t)offset;
  q->size = (uint64_t)length;
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
  /* JavaScript forgets the listing behind. */
  answer_release(req, OP_RELEASEDIR, ino, fi, 0);
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
  BEGIN_CHANGE(OP_SETXATTR, ino, ino, 0);
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
  BEGIN_CHANGE(OP_REMOVEXATTR, ino, ino, 0);
  q->name = strdup(name);
  enqueue(s, q);
}

static void ll_access(fuse_req_t req, fuse_ino_t ino, int mask) {
  BEGIN(OP_ACCESS, ino);
  q->flags = mask;
  enqueue(s, q);
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
  if (answer_create(req, parent, name, mode, fi)) return;
  BEGIN_NAMING(OP_CREATE, parent, 0, 0, parent, name);
  q->name = strdup(name);
  q->mode = mode;
  q->flags = fi->flags;
  enqueue(s, q);
}

/* Hard links and device nodes: the service stores none (POSIX: EPERM). */
static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev) {
  fuse_reply_err(req, EPERM);
}

/* Symbolic links: JavaScript's, stored as link files (src/fuse/link-files.ts). The name joins the folder's. */
static void ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name) {
  BEGIN_NAMING(OP_SYMLINK, parent, parent, 0, parent, name);
  q->name = strdup(name);
  q->name2 = strdup(link);
  enqueue(s, q);
}

static void ll_readlink(fuse_req_t req, fuse_ino_t ino) {
  BEGIN(OP_READLINK, ino);
  enqueue(s, q);
}
static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname) {
  fuse_reply_err(req, EPERM);
}

const struct fuse_lowlevel_ops ll_ops = {
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
  .readlink = ll_readlink,
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
  .fallocate = ll_fallocate,
};
