/*
 * Creates answered here, and the files created here that the engine follows so as to answer their close.
 */
#include "engine_i.h"
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* ---- closes answered here ------------------------------------------------------------------- */

/*
 * A small file created here (answer_create) whose every write the engine answered: its first flush (the
 * close) is answered here too, once the file's close record, its bytes included, is written to the log
 * JavaScript gave (journalSwitch). The page cache has it then, so a crash of the gateway (kill -9) loses
 * nothing, as when JavaScript answers the close. The record is the engine's own close record
 * (close_record.c: the file's place, time, SHA-1 and bytes), under the id the create's record gave
 * JavaScript for the file's version; JavaScript journals that version (same id) when it applies the
 * flush, and the journal's own lines about the id (its put, a rename, the upload's removal) supersede
 * this record at replay, which reads these logs before its own. A file the engine cannot follow
 * exactly (a write not answered here, a truncate, an fsync, a second writer, an unlink of its name, a
 * rename anywhere since its folder's path was told) is closed by JavaScript, as before.
 */

/* All with `lock` held. */
created_file *created_find(session *s, uint64_t fh) {
  for (created_file *c = s->created; c; c = c->next)
    if (c->fh == fh) return c;
  return NULL;
}

created_file *created_take(session *s, uint64_t fh) {
  for (created_file **p = &s->created; *p; p = &(*p)->next) {
    created_file *c = *p;
    if (c->fh != fh) continue;
    *p = c->next;
    s->created_count--;
    s->created_bytes -= c->room;
    return c;
  }
  return NULL;
}

void created_free(created_file *c) {
  if (!c) return;
  if (c->fd >= 0) close(c->fd);
  free(c->data);
  free(c->name);
  free(c->library);
  free(c->fullpath);
  free(c);
}

/* A file to follow, named `name`, with a fresh id (16 hex digits, as the upload journal's); NULL when out of memory. */
static created_file *created_new(const char *name) {
  created_file *c = calloc(1, sizeof(created_file));
  if (!c) return NULL;
  c->fd = -1;
  c->name = strdup(name);
  if (!c->name || !new_journal_id(c->id)) {
    created_free(c);
    return NULL;
  }
  return c;
}

/* Copies an answered write of `c` into what the engine follows of it. */
void created_write(session *s, created_file *c, const char *buf, size_t size, off_t off) {
  size_t end = (size_t)off + size;
  if (c->spoiled) return;
  if (end > c->room) {
    size_t room = c->room ? c->room : 4096;
    while (room < end) room *= 2;
    char *grown = s->created_bytes + (room - c->room) <= CREATED_BYTES_MAX ? realloc(c->data, room) : NULL;
    if (!grown) {
      c->spoiled = 1;
      return;
    }
    s->created_bytes += room - c->room;
    c->data = grown;
    c->room = room;
  }
  if ((size_t)off > c->size) memset(c->data + c->size, 0, (size_t)off - c->size);
  memcpy(c->data + off, buf, size);
  if (end > c->size) c->size = end;
}

/* A change of `ino`'s bytes the engine does not follow: its close goes to JavaScript. */
void created_spoil(session *s, fuse_ino_t ino) {
  pthread_mutex_lock(&s->lock);
  for (created_file *c = s->created; c; c = c->next)
    if (c->ino == ino) c->spoiled = 1;
  pthread_mutex_unlock(&s->lock);
}

/* An unlink of `name` in `parent`: a file created there under that name is gone (its close is JavaScript's). */
void created_unlinked(session *s, fuse_ino_t parent, const char *name) {
  pthread_mutex_lock(&s->lock);
  for (created_file *c = s->created; c; c = c->next)
    if (c->parent == parent && strcmp(c->name, name) == 0) c->spoiled = 1;
  pthread_mutex_unlock(&s->lock);
}

/*
 * A rename (of a folder, maybe): paths told before it may be stale, and a file created here under either
 * name has another path now (its close is JavaScript's). Answers the new epoch: JavaScript, once it knows
 * the rename moved a file, keeps what was told before it (pathsKept).
 */
uint64_t paths_changed(session *s, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname) {
  created_unlinked(s, parent, name);
  created_unlinked(s, newparent, newname);
  pthread_mutex_lock(&s->lock);
  uint64_t epoch = ++s->paths_epoch;
  pthread_mutex_unlock(&s->lock);
  return epoch;
}

/*
 * A file the kernel wrote itself (passthrough): its whole content read from the spool, when it is small,
 * and the spool's modification time. 0 when it is larger, unreadable, or changed while read (another
 * descriptor of the open file writing meanwhile): JavaScript closes it then.
 */
static int created_read_spool(created_file *c) {
  struct stat st, after;
  if (fstat(c->fd, &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size > ANSWERED_WRITE_END) return 0;
  size_t size = (size_t)st.st_size;
  char *data = malloc(size ? size : 1);
  if (!data) return 0;
  size_t done = 0;
  while (done < size) {
    ssize_t n = pread(c->fd, data + done, size - done, (off_t)done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += (size_t)n;
  }
  if (done < size || fstat(c->fd, &after) != 0 || after.st_size != st.st_size || after.st_mtim.tv_sec != st.st_mtim.tv_sec ||
      after.st_mtim.tv_nsec != st.st_mtim.tv_nsec) {
    free(data);
    return 0;
  }
  free(c->data);
  c->data = data;
  c->size = c->room = size;
  c->spool_mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  return 1;
}

/* The spool's disk has `spool_min_free` bytes free (for root, the blocks kept for it count). */
static int spool_has_room(session *s, int fd) {
  struct statvfs st;
  if (s->spool_min_free == 0 || fstatvfs(fd, &st) != 0) return 0;
  uint64_t blocks = geteuid() == 0 ? st.f_bfree : st.f_bavail;
  return blocks * (uint64_t)st.f_frsize >= s->spool_min_free;
}

int answer_flush(session *s, fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  if (!fi || fi->fh < CREATED_FH_BASE) return 0;
  pthread_mutex_lock(&s->lock);
  created_file *c = created_take(s, fi->fh);
  /* Records waiting for JavaScript stay within ANSWERED_BYTES_MAX: past it, JavaScript closes the file. */
  int ok = c && !c->spoiled && c->paths_epoch == s->paths_epoch && s->answered_bytes < ANSWERED_BYTES_MAX;
  uint64_t waiting = s->answered_bytes;
  pthread_mutex_unlock(&s->lock);
  /* Written by the kernel (passthrough): its bytes are read back from the spool, when small, and only
   * while the disk has room (a write of it the disk refused is never seen here). */
  if (ok && c->fd >= 0) ok = spool_has_room(s, c->fd) && created_read_spool(c);
  /* An answered close is a promise JavaScript keeps by journaling the file: never made on a disk too full
   * for that (JavaScript then answers the close, and its error reaches the writer). */
  if (ok) ok = journal_has_room(s, waiting + c->size);
  queued *q = ok ? new_queued(s, OP_FLUSH, NULL, ino) : NULL;
  char *written = NULL;
  size_t len = 0;
  uint64_t record = q ? journal_append(s, c, &written, &len) : 0;
  /* The id travels with the record (JavaScript also has it from the create's record). */
  if (record) {
    q->name2 = strdup(c->id);
    q->spool_mtime_ns = c->spool_mtime_ns;
  }
  created_free(c);
  if (!record) {
    if (q) free_queued(q);
    return 0;
  }
  pthread_mutex_lock(&s->lock);
  s->closes_answered++;
  s->answered_bytes += len;
  pthread_mutex_unlock(&s->lock);
  q->has_fh = 1;
  q->fh = fi->fh;
  q->ino2 = record;
  q->data = written;
  q->data_len = len;
  q->answered = 1;
  enqueue_quiet(s, q);
  fuse_reply_err(req, 0);
  return 1;
}

/*
 * Answered here (writeback cache only): a create in a folder whose names are all known, of a name it does
 * not hold, is a new empty file. The engine numbers its inode and handle, answers with its attributes
 * (the mode asked for, the mount's owner, the time now), keeps them, and queues the create for
 * JavaScript as a record (quietly: it travels with the next request, the flush at close), which makes
 * the file in the Vfs before anything the kernel sends about it afterwards. Should that fail (a name made
 * elsewhere meanwhile, a folder removed elsewhere), the handle's next flush or fsync answers the error.
 */

/*
 * `journal_on`: a log was given (journalSwitch) when the create arrived; `spool_dir`: with passthrough, a
 * duplicate of the spool folder's descriptor then (-1: none), which the caller closes.
 */
static int answer_create_in(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi, int journal_on, int spool_dir) {
  session *s = SESSION(req);
  /*
   * With passthrough (no writeback cache): a file followed for its close gets its spool here, under its
   * id in the journal's spool folder, and the kernel writes it itself (see "Passthrough"); a file that
   * would not be followed is JavaScript's to create.
   */
  int pass = spool_dir >= 0;
  if (!(s->got_writeback || pass)) return 0;
  queued *q = new_queued(s, OP_CREATE, NULL, parent);
  if (!q) return 0;
  q->name = strdup(name);
  if (!q->name) {
    free_queued(q);
    return 0;
  }
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct fuse_entry_param e;
  memset(&e, 0, sizeof(e));
  e.attr.st_mode = S_IFREG | (mode & 07777);
  e.attr.st_nlink = 1;
  e.attr.st_uid = s->create_uid;
  e.attr.st_gid = s->create_gid;
  e.attr.st_blksize = 128 * 1024;
  e.attr.st_atim = e.attr.st_mtim = e.attr.st_ctim = now;
  e.generation = 1;
  e.entry_timeout = e.attr_timeout = s->create_timeout;
  uint64_t fh = 0;
  /* Followed for its close when a log is given (see "Closes answered here"). */
  created_file *c = journal_on ? created_new(name) : NULL;
  int followed = 0;
  int backing = 0;
  if (pass) {
    if (c) c->fd = spool_take_ready(s, c->id);
    if (c && c->fd < 0) c->fd = spool_make(s, spool_dir, c->id);
    /* A spool made ahead (or taken from the pool) carries the time it was made: the file's times are the
     * spool's (an empty file shows them), so they start now, at its create. */
    if (c && c->fd >= 0) futimens(c->fd, NULL);
    backing = c && c->fd >= 0 ? backing_open(s, c->fd) : 0;
    /* Not allowed to this process (CAP_SYS_ADMIN): never tried again. */
    if (backing == -EPERM) s->backing_denied = 1;
    if (backing <= 0) {
      if (c && c->fd >= 0) unlinkat(spool_dir, c->id, 0);
      created_free(c);
      free_queued(q);
      return 0;
    }
  }
  pthread_mutex_lock(&s->lock);
  name_set *n = names_find(s, parent);
  int ok = n && n->expires > now_s() && !names_holds(n, name);
  /* Handed to the kernel only when followed: the engine answers nothing of it otherwise. */
  if (ok && pass) ok = n->library && n->paths_epoch == s->paths_epoch && s->created_count < CREATED_MAX;
  attr_entry *a = NULL;
  if (ok) {
    e.ino = s->next_ino;
    a = attr_find(s, e.ino, 1);
    ok = a != NULL;
  }
  if (ok && !names_put(s, n, name)) {
    names_drop(s, parent);
    attr_drop(s, e.ino);
    ok = 0;
  }
  if (ok) {
    s->next_ino++;
    fh = s->next_fh++;
    e.attr.st_ino = e.ino;
    /* A listing JavaScript made before this has not got the name. */
    s->names_epoch = ++s->epoch;
    a->st = e.attr;
    a->valid = !pass;
    a->times_known = 1;
    a->expires = now_s() + s->create_timeout;
    a->changed = s->epoch;
    /* The kernel writes it itself: no attributes from the cache until JavaScript is done with it
     * (attrLive); getattr is answered from the spool meanwhile. */
    if (pass) {
      a->inflight++;
      a->live_stale = 0;
      a->live_fd = c ? dup(c->fd) : -1;
      a->has_live_fd = a->live_fd >= 0;
    }
    s->creates_answered++;
    if (c && n->library && n->paths_epoch == s->paths_epoch && s->created_count < CREATED_MAX) {
      c->library = strdup(n->library);
      size_t folder = strlen(n->fullpath);
      c->fullpath = malloc(folder + strlen(name) + 2);
      /* JavaScript's version of the file gets this id: the record of its close (if answered here) is under it. */
      q->name2 = c->library && c->fullpath ? strdup(c->id) : NULL;
      if (q->name2) {
        if (folder) sprintf(c->fullpath, "%s/%s", n->fullpath, name);
        else strcpy(c->fullpath, name);
        c->fh = fh;
        c->ino = e.ino;
        c->parent = parent;
        c->paths_epoch = s->paths_epoch;
        c->next = s->created;
        s->created = c;
        s->created_count++;
        followed = 1;
      }
    }
  }
  pthread_mutex_unlock(&s->lock);
  if (pass && (!ok || !followed)) {
    /* Not answered after all (or, out of memory, not followed): the spool and its backing id go. */
    backing_close(s, backing);
    unlinkat(spool_dir, c->id, 0);
    if (ok) {
      pthread_mutex_lock(&s->lock);
      names_drop(s, parent);
      attr_drop(s, e.ino);
      pthread_mutex_unlock(&s->lock);
      ok = 0;
    }
  }
  if (!followed) {
    created_free(c);
    c = NULL;
  }
  if (!ok) {
    free_queued(q);
    return 0;
  }
  q->ino2 = e.ino;
  q->backing = backing;
  q->has_fh = 1;
  q->fh = fh;
  q->mode = mode;
  q->flags = fi->flags;
  q->mtime_ms = timespec_ms(&now);
  q->answered = 1;
  /* Queued before the answer: whatever the kernel sends about the file reaches JavaScript after it. */
  enqueue_quiet(s, q);
  fi->fh = fh;
  fi->keep_cache = 1;
  fi->direct_io = 0;
  if ((backing ? reply_create_backing(req, &e, fh, backing) : fuse_reply_create(req, &e, fi)) == -ENOENT) {
    /* Interrupted: the kernel will neither use nor release the file; JavaScript closes it. */
    queued *r = new_queued(s, OP_RELEASE, NULL, e.ino);
    if (r) {
      r->has_fh = 1;
      r->fh = fh;
      r->flags = RELEASE_NEVER_GIVEN;
      r->answered = 1;
      enqueue_quiet(s, r);
    }
  }
  return 1;
}

int answer_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
  session *s = SESSION(req);
  if (!s->answer_creates || !s->names || !s->attrs || !name_answerable(s, name)) return 0;
  /*
   * The log and the spool folder as they are now, read under journal_lock (journalSwitch and spoolFolder
   * change them on the main thread): the folder's descriptor duplicated, so that a change of folder
   * meanwhile never closes it under this create. Only with passthrough, where the create makes a spool
   * there; O_DIRECT through a backing file would follow the local disk's alignment rules, which FUSE does
   * not have.
   */
  int want_dir = !s->got_writeback && rings_passthrough(s->rings) && !s->backing_denied && !(fi->flags & O_DIRECT);
  pthread_mutex_lock(&s->journal_lock);
  int journal_on = s->journal_fd >= 0;
  int spool_dir = want_dir && journal_on && s->spool_dir_fd >= 0 ? fcntl(s->spool_dir_fd, F_DUPFD_CLOEXEC, 0) : -1;
  pthread_mutex_unlock(&s->journal_lock);
  int answered = answer_create_in(req, parent, name, mode, fi, journal_on, spool_dir);
  if (spool_dir >= 0) close(spool_dir);
  return answered;
}
