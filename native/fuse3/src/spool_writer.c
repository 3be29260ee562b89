/*
 * Direct spool writes (spoolAttach): writes answered on the reader thread into the spool, the hash thread
 * that keeps their SHA-1 behind them, and the sync thread that makes their bytes durable early.
 */
#include "engine_i.h"

/* ---- direct spool writes ---------------------------------------------------------------------- */

/* The writer of `fh`, with spool_lock held; NULL if the handle writes through JavaScript. */
spool_writer *spool_find(session *s, uint64_t fh) {
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
int spool_hash_alive(const spool_writer *w) {
  return w->sha && !w->hash_broken;
}

/*
 * Writes `size` bytes at `off` into the spool of `fh` (spool_io held shared by the caller), books it
 * for the hash, and queues the record JavaScript does its bookkeeping from. Answers the bytes written or
 * -errno; 1 in *found when `fh` has a writer (else nothing was done). The pwrite runs outside spool_lock,
 * so writes of several reader threads (to one spool or several) go in parallel. It never waits for the
 * hash: a reader thread does that after it let go of spool_io (spool_wait_hash).
 */
ssize_t spool_write(session *s, uint64_t fh, const char *buf, size_t size, off_t off, int *found) {
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
  pthread_mutex_unlock(&s->spool_lock);
  return err ? -err : (ssize_t)size;
}

/*
 * Waits while the hash of `fh`'s writer is more than SPOOL_HASH_LAG_MAX behind its writes (reader threads,
 * before they answer a direct write; spool_io not held, so an attach or detach on the main thread never
 * waits for the hash). Looked up again at each wake: a writer detached meanwhile ends the wait.
 */
void spool_wait_hash(session *s, uint64_t fh) {
  pthread_mutex_lock(&s->spool_lock);
  for (;;) {
    spool_writer *w = spool_find(s, fh);
    if (!w || !spool_hash_alive(w) || w->written - w->hashed <= SPOOL_HASH_LAG_MAX || s->hasher_stop) break;
    pthread_cond_wait(&s->hash_progress, &s->spool_lock);
  }
  pthread_mutex_unlock(&s->spool_lock);
}

void spool_free(spool_writer *w) {
  if (w->sha) EVP_MD_CTX_free(w->sha);
  if (w->fd >= 0) close(w->fd);
  free(w);
}

/* Removes the writer of `fh` from the list (spool_lock held) and returns it; NULL if there is none. */
spool_writer *spool_unlink(session *s, uint64_t fh) {
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
void spool_retire(session *s, spool_writer *w) {
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
int spool_digest(spool_writer *w, char *hex) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!w->sha || EVP_DigestFinal_ex(w->sha, md, &len) != 1 || len != 20) return 0;
  hex_of(md, len, hex);
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
void *hasher_main(void *arg) {
  session *s = arg;
  pthread_setname_np(pthread_self(), "fuse-hash"); /* as `top -H` shows it */
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
      uint64_t hashed = ok ? from + (uint64_t)got : from;
      /* Written and read back: their writeback starts now rather than all at the fsync (best effort; it
       * changes what is on disk early, never what the file holds). The writer is ours while `hashing`. */
      int started = 0;
      if (s->writeback_ahead && hashed - w->flushing >= s->writeback_ahead) {
        started = sync_file_range(w->fd, (off_t)w->flushing, (off_t)(hashed - w->flushing), SYNC_FILE_RANGE_WRITE) == 0;
        w->flushing = hashed;
      }
      int sync_fd = -1;
      if (started && s->syncer_started && w->flushing - w->syncing >= s->sync_ahead) {
        w->syncing = w->flushing;
        sync_fd = fcntl(w->fd, F_DUPFD_CLOEXEC, 0);
      }
      pthread_mutex_lock(&s->spool_lock);
      s->spool_writebacks += started;
      if (sync_fd >= 0) {
        if (s->sync_count < SYNC_QUEUE_MAX) {
          s->sync_fds[s->sync_count++] = sync_fd;
          pthread_cond_signal(&s->sync_work);
        } else {
          close(sync_fd);
        }
      }
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

/*
 * The sync thread: fdatasyncs the spools the hash thread asks for (see `sync_ahead`), each on a
 * descriptor of its own, closed after. A failure is not reported here: the application's fsync (or the
 * journal's) makes the spool durable and answers it.
 */
void *syncer_main(void *arg) {
  session *s = arg;
  pthread_setname_np(pthread_self(), "fuse-sync"); /* as `top -H` shows it */
  pthread_mutex_lock(&s->spool_lock);
  while (!s->syncer_stop) {
    if (s->sync_count == 0) {
      pthread_cond_wait(&s->sync_work, &s->spool_lock);
      continue;
    }
    int fd = s->sync_fds[0];
    memmove(s->sync_fds, s->sync_fds + 1, (size_t)(--s->sync_count) * sizeof(int));
    pthread_mutex_unlock(&s->spool_lock);
    int ok = fdatasync(fd) == 0;
    close(fd);
    pthread_mutex_lock(&s->spool_lock);
    s->spool_syncs += ok;
  }
  while (s->sync_count > 0) close(s->sync_fds[--s->sync_count]);
  pthread_mutex_unlock(&s->spool_lock);
  return NULL;
}

static void stop_syncer(session *s) {
  stop_thread(&s->spool_lock, &s->syncer_stop, &s->sync_work, &s->syncer_started, s->syncer);
}

/* Stops the hash thread (after the readers: none waits for it any more) and frees every writer. */
void stop_hasher(session *s) {
  pthread_mutex_lock(&s->spool_lock);
  s->hasher_stop = 1;
  pthread_cond_broadcast(&s->hash_work);
  pthread_cond_broadcast(&s->hash_progress);
  pthread_mutex_unlock(&s->spool_lock);
  if (s->hasher_started) pthread_join(s->hasher, NULL);
  s->hasher_started = 0;
  stop_syncer(s);
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
