/*
 * The null file system of the benchmarks, built only into the benchmark's addon (fuse3_bench.node,
 * CLOUDLIB_NULL_FILES; see binding.gyp): production builds do not contain it.
 */
#include "engine_i.h"

#ifndef CLOUDLIB_NULL_FILES
#error "null_fs.c is built only into the benchmark's addon (CLOUDLIB_NULL_FILES)"
#endif

/* ---- the null file system -------------------------------------------------------------------- */

/*
 * A file system answered entirely here, for the benchmarks' ceiling of small files: names, folders and
 * sizes are kept in memory, every other request (the bytes of writes included) is answered at once and
 * nothing reaches JavaScript. What it measures is the kernel and the engine's reader thread alone. With
 * passthrough granted and a spool folder given (spoolFolder: files named 0, 1, 2… made beforehand), a
 * create is answered with the next of those files as its backing file, in turn, as a passthrough mount
 * answers it with a spool: the kernel writes it, and it is let go at the release.
 */
typedef struct null_node {
  struct null_node *next_name;
  fuse_ino_t ino, parent;
  char *name;
  int dir;
  off_t size;
  /* The backing file its last create was answered with (0: none), and its descriptor. */
  int backing, backing_fd;
} null_node;

#define NULL_BUCKETS 65536

static unsigned null_hash(fuse_ino_t parent, const char *name) {
  unsigned h = (unsigned)parent * 2654435761u;
  for (const char *c = name; *c; c++) h = h * 31 + (unsigned char)*c;
  return h % NULL_BUCKETS;
}

static null_node *null_get(session *s, fuse_ino_t ino) {
  return ino >= 1 && ino <= s->null_count ? s->null_by_ino[ino - 1] : NULL;
}

static null_node *null_find(session *s, fuse_ino_t parent, const char *name) {
  for (null_node *n = s->null_by_name[null_hash(parent, name)]; n; n = n->next_name)
    if (n->parent == parent && strcmp(n->name, name) == 0) return n;
  return NULL;
}

/* A new node (`lock` held); NULL when out of memory. */
static null_node *null_add(session *s, fuse_ino_t parent, const char *name, int dir) {
  if (s->null_count == s->null_room) {
    fuse_ino_t room = s->null_room ? s->null_room * 2 : 1024;
    null_node **grown = realloc(s->null_by_ino, room * sizeof(null_node *));
    if (!grown) return NULL;
    s->null_by_ino = grown;
    s->null_room = room;
  }
  null_node *n = calloc(1, sizeof(null_node));
  if (!n || !(n->name = strdup(name))) {
    free(n);
    return NULL;
  }
  n->ino = ++s->null_count;
  n->parent = parent;
  n->dir = dir;
  s->null_by_ino[n->ino - 1] = n;
  if (parent) {
    unsigned h = null_hash(parent, name);
    n->next_name = s->null_by_name[h];
    s->null_by_name[h] = n;
  }
  return n;
}

static void null_stat(const null_node *n, struct stat *st) {
  memset(st, 0, sizeof(*st));
  st->st_ino = n->ino;
  st->st_mode = n->dir ? S_IFDIR | 0755 : S_IFREG | 0644;
  st->st_nlink = n->dir ? 2 : 1;
  st->st_uid = getuid();
  st->st_gid = getgid();
  st->st_size = n->size;
  st->st_blocks = (n->size + 511) / 512;
  st->st_blksize = 4096;
  clock_gettime(CLOCK_REALTIME, &st->st_mtim);
  st->st_atim = st->st_ctim = st->st_mtim;
}

static void null_entry(fuse_req_t req, const null_node *n) {
  struct fuse_entry_param e;
  memset(&e, 0, sizeof(e));
  null_stat(n, &e.attr);
  e.ino = n->ino;
  e.generation = 1;
  e.attr_timeout = e.entry_timeout = 2.0;
  fuse_reply_entry(req, &e);
}

static void null_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  session *s = SESSION(req);
  pthread_mutex_lock(&s->lock);
  null_node *n = null_find(s, parent, name);
  struct fuse_entry_param e;
  memset(&e, 0, sizeof(e));
  if (n) {
    null_stat(n, &e.attr);
    e.ino = n->ino;
    e.generation = 1;
    e.attr_timeout = 2.0;
  }
  e.entry_timeout = 2.0;
  pthread_mutex_unlock(&s->lock);
  fuse_reply_entry(req, &e);
}

static void null_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  session *s = SESSION(req);
  struct stat st;
  pthread_mutex_lock(&s->lock);
  null_node *n = null_get(s, ino);
  if (n) null_stat(n, &st);
  pthread_mutex_unlock(&s->lock);
  if (n) fuse_reply_attr(req, &st, 2.0);
  else fuse_reply_err(req, ENOENT);
}

static void null_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
  session *s = SESSION(req);
  struct stat st;
  pthread_mutex_lock(&s->lock);
  null_node *n = null_get(s, ino);
  if (n && (to_set & FUSE_SET_ATTR_SIZE)) n->size = attr->st_size;
  if (n) null_stat(n, &st);
  pthread_mutex_unlock(&s->lock);
  if (n) fuse_reply_attr(req, &st, 2.0);
  else fuse_reply_err(req, ENOENT);
}

/* The backing file a create of `n` is answered with (see null_node), registered: its id, or 0 for none. */
static int null_backing(session *s, null_node *n) {
  if (s->got_writeback || !rings_passthrough(s->rings)) return 0;
  pthread_mutex_lock(&s->journal_lock);
  int fd = -1;
  if (s->spool_dir_fd >= 0) {
    for (int attempt = 0; attempt < 2 && fd < 0; attempt++) {
      char name[16];
      snprintf(name, sizeof(name), "%u", s->null_backing_next++);
      fd = openat(s->spool_dir_fd, name, O_RDWR | O_CLOEXEC);
      /* Past the last file: from the first again. */
      if (fd < 0) s->null_backing_next = 0;
    }
  }
  pthread_mutex_unlock(&s->journal_lock);
  if (fd < 0) return 0;
  int id = backing_open(s, fd);
  if (id <= 0) {
    close(fd);
    return 0;
  }
  pthread_mutex_lock(&s->lock);
  int old = n->backing, old_fd = n->backing_fd;
  n->backing = id;
  n->backing_fd = fd;
  pthread_mutex_unlock(&s->lock);
  if (old > 0) {
    backing_close(s, old);
    close(old_fd);
  }
  return id;
}

static void null_make(fuse_req_t req, fuse_ino_t parent, const char *name, int dir, struct fuse_file_info *fi) {
  session *s = SESSION(req);
  pthread_mutex_lock(&s->lock);
  null_node *n = null_find(s, parent, name);
  int exists = n != NULL;
  if (!n) n = null_add(s, parent, name, dir);
  null_node copy;
  if (n) copy = *n;
  pthread_mutex_unlock(&s->lock);
  if (!n) return (void)fuse_reply_err(req, ENOMEM);
  if (exists && (dir || (fi && (fi->flags & O_EXCL)))) return (void)fuse_reply_err(req, EEXIST);
  if (!fi) return null_entry(req, &copy);
  struct fuse_entry_param e;
  memset(&e, 0, sizeof(e));
  null_stat(&copy, &e.attr);
  e.ino = copy.ino;
  e.generation = 1;
  e.attr_timeout = e.entry_timeout = 2.0;
  fi->fh = copy.ino;
  int backing = null_backing(s, n);
  if (backing > 0) reply_create_backing(req, &e, fi->fh, backing);
  else fuse_reply_create(req, &e, fi);
}

static void null_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
  null_make(req, parent, name, 1, NULL);
}

static void null_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
  null_make(req, parent, name, 0, fi);
}

static void null_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  fi->fh = ino;
  fuse_reply_open(req, fi);
}

static void null_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
  session *s = SESSION(req);
  pthread_mutex_lock(&s->lock);
  null_node *n = null_get(s, ino);
  if (n && off + (off_t)size > n->size) n->size = off + (off_t)size;
  pthread_mutex_unlock(&s->lock);
  fuse_reply_write(req, size);
}

static void null_done(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  fuse_reply_err(req, 0);
}

static void null_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  session *s = SESSION(req);
  pthread_mutex_lock(&s->lock);
  null_node *n = null_get(s, ino);
  int backing = n ? n->backing : 0, fd = n ? n->backing_fd : -1;
  if (n) n->backing = 0;
  pthread_mutex_unlock(&s->lock);
  if (backing > 0) {
    backing_close(s, backing);
    close(fd);
  }
  fuse_reply_err(req, 0);
}

static void null_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
  fuse_reply_err(req, 0);
}

static void null_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  fuse_reply_buf(req, NULL, 0);
}

static void null_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  fuse_reply_none(req);
}

static void null_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) {
  fuse_reply_err(req, EOPNOTSUPP);
}

const struct fuse_lowlevel_ops null_ops = {
  .init = ll_init,
  .lookup = null_lookup,
  .forget = null_forget,
  .getattr = null_getattr,
  .setattr = null_setattr,
  .mkdir = null_mkdir,
  .create = null_create,
  .open = null_open,
  .write = null_write,
  .flush = null_done,
  .release = null_release,
  .fsync = null_fsync,
  .opendir = null_open,
  .readdir = null_readdir,
  .releasedir = null_done,
  .getxattr = null_getxattr,
};

int null_fs_start(session *s) {
  s->null_by_name = calloc(NULL_BUCKETS, sizeof(null_node *));
  pthread_mutex_lock(&s->lock);
  null_node *root = s->null_by_name ? null_add(s, 0, "", 1) : NULL;
  pthread_mutex_unlock(&s->lock);
  return root != NULL;
}

void null_fs_free(session *s) {
  for (fuse_ino_t i = 0; i < s->null_count; i++) {
    free(s->null_by_ino[i]->name);
    free(s->null_by_ino[i]);
  }
  free(s->null_by_ino);
  free(s->null_by_name);
  s->null_by_ino = NULL;
  s->null_by_name = NULL;
  s->null_count = s->null_room = 0;
}
