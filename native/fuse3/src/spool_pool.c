/*
 * The spool pool (emptied spools reused) and the maker thread of spools made ahead for answered creates.
 */
#include "engine_i.h"

/* Reads up to POOL_BATCH names of the pool (pool_lock held); none for a second once it was found empty. */
static void pool_refill(session *s) {
  if (now_s() < s->pool_empty_until) return;
  if (!s->pool_names) s->pool_names = calloc(POOL_BATCH, POOL_NAME_MAX);
  int dfd = s->pool_names ? dup(s->pool_dir_fd) : -1;
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d) {
    if (dfd >= 0) close(dfd);
    return;
  }
  rewinddir(d);
  struct dirent *e;
  while (s->pool_count < POOL_BATCH && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || strlen(e->d_name) >= POOL_NAME_MAX) continue;
    strcpy(s->pool_names[s->pool_count++], e->d_name);
  }
  closedir(d);
  if (s->pool_count == 0) s->pool_empty_until = now_s() + 1.0;
}

/*
 * Opens spool `id` for reading and writing (`flags`: O_CREAT | O_EXCL to make it, 0600): without access
 * times, so that the engine reading a small file back at its close does not make the spool's inode
 * dirty again (the gateway owns its spools; elsewhere it is opened as usual).
 */
static int spool_open(int spool_dir, const char *id, int flags) {
  int fd = openat(spool_dir, id, flags | O_RDWR | O_CLOEXEC | O_NOATIME, 0600);
  if (fd < 0 && errno == EPERM) fd = openat(spool_dir, id, flags | O_RDWR | O_CLOEXEC, 0600);
  return fd;
}

/*
 * The spool `id` made from an emptied one of the pool (renamed into the spool folder): its descriptor,
 * or -1 when the pool has none. Reusing a file spares the file system an inode (see the journal's
 * recycle: on ext4 new inodes come slowly where many went recently).
 */
static int spool_from_pool(session *s, int spool_dir, const char *id) {
  pthread_mutex_lock(&s->pool_lock);
  int renamed = 0;
  for (int round = 0; round < 2 && !renamed && s->pool_dir_fd >= 0; round++) {
    while (s->pool_count > 0 && !renamed) renamed = renameat(s->pool_dir_fd, s->pool_names[--s->pool_count], spool_dir, id) == 0;
    if (!renamed && round == 0) pool_refill(s);
  }
  pthread_mutex_unlock(&s->pool_lock);
  if (!renamed) return -1;
  int fd = spool_open(spool_dir, id, 0);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size == 0) return fd;
  /* Not an empty file after all: made anew instead. */
  if (fd >= 0) close(fd);
  unlinkat(spool_dir, id, 0);
  return -1;
}

/* An empty spool `id` in `spool_dir`, from the pool or made anew: its descriptor, or -1. */
int spool_make(session *s, int spool_dir, const char *id) {
  int fd = spool_from_pool(s, spool_dir, id);
  return fd >= 0 ? fd : spool_open(spool_dir, id, O_CREAT | O_EXCL);
}

/*
 * Spools made ahead: with passthrough every file the engine creates needs an empty spool at once, and
 * taking one from the pool (a rename between two large folders, an open) was a fifth of the reader
 * thread's work for a small file, on the path the application waits on. The maker thread keeps up to
 * READY_MAX spools made and open, each under a journal id of its own, and a create takes one. One not
 * taken has no record: the journal removes such spools at its next start, and a stopping session puts them
 * back into the pool.
 */
void *maker_main(void *arg) {
  session *s = arg;
  pthread_setname_np(pthread_self(), "fuse-spools"); /* as `top -H` shows it */
  pthread_mutex_lock(&s->pool_lock);
  while (!s->maker_stop) {
    int spool_dir = s->spool_dir_fd;
    if (s->ready_count >= READY_MAX || spool_dir < 0 || s->pool_dir_fd < 0) {
      pthread_cond_wait(&s->maker_work, &s->pool_lock);
      continue;
    }
    uint64_t gen = s->spool_gen;
    s->maker_busy = 1;
    pthread_mutex_unlock(&s->pool_lock);
    char id[17];
    int fd = new_journal_id(id) ? spool_make(s, spool_dir, id) : -1;
    pthread_mutex_lock(&s->pool_lock);
    s->maker_busy = 0;
    pthread_cond_broadcast(&s->maker_idle);
    if (fd >= 0 && gen == s->spool_gen && !s->maker_stop && s->ready_count < READY_MAX) {
      ready_spool *r = &s->ready[s->ready_count++];
      memcpy(r->id, id, sizeof(r->id));
      r->fd = fd;
      continue;
    }
    if (fd >= 0) {
      /* Made for a folder that is not the spool folder any more: gone again. */
      close(fd);
      unlinkat(spool_dir, id, 0);
      continue;
    }
    /* None could be made (a full disk, say): a second before trying again; creates make their own meanwhile. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    pthread_cond_timedwait(&s->maker_work, &s->pool_lock, &until);
  }
  pthread_mutex_unlock(&s->pool_lock);
  return NULL;
}

/*
 * A spool made ahead, for a create: its id into `id` and its descriptor, or -1 when none is ready. Wakes
 * the maker when few are left.
 */
int spool_take_ready(session *s, char id[17]) {
  pthread_mutex_lock(&s->pool_lock);
  int fd = -1;
  if (s->ready_count > 0) {
    ready_spool *r = &s->ready[--s->ready_count];
    memcpy(id, r->id, 17);
    fd = r->fd;
    s->ready_taken++;
  }
  if (s->ready_count < READY_LOW && s->maker_started) pthread_cond_signal(&s->maker_work);
  pthread_mutex_unlock(&s->pool_lock);
  return fd;
}

/*
 * With pool_lock held: waits until the maker is not making one (it works outside the lock, on the folders
 * it read), then puts the spools made ahead back into the pool of `pool_dir` (removed when that fails):
 * they are for a folder about to change or go.
 */
void ready_return_locked(session *s, int spool_dir, int pool_dir) {
  while (s->maker_busy) pthread_cond_wait(&s->maker_idle, &s->pool_lock);
  s->spool_gen++;
  while (s->ready_count > 0) {
    ready_spool *r = &s->ready[--s->ready_count];
    close(r->fd);
    if (pool_dir < 0 || renameat(spool_dir, r->id, pool_dir, r->id) != 0) unlinkat(spool_dir, r->id, 0);
  }
}

/* Tells a background thread of the session to stop (`stop` set under `lock`, `wake` broadcast) and joins it. */
void stop_thread(pthread_mutex_t *lock, int *stop, pthread_cond_t *wake, int *started, pthread_t thread) {
  pthread_mutex_lock(lock);
  *stop = 1;
  pthread_cond_broadcast(wake);
  pthread_mutex_unlock(lock);
  if (*started) pthread_join(thread, NULL);
  *started = 0;
}

/* Stops the maker thread (its spools stay made until ready_return_locked). */
void stop_maker(session *s) {
  stop_thread(&s->pool_lock, &s->maker_stop, &s->maker_work, &s->maker_started, s->maker);
}
