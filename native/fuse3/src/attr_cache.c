/*
 * The kernel attribute cache: the attributes JavaScript answered, kept for as long as the kernel was told to
 * keep them, and a getattr answered from them (see "Attribute cache" in engine_i.h).
 */
#include "engine_i.h"

/* ---- the attribute cache (all with `lock` held) ---------------------------------------------- */

double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The entry of `ino`; with `create`, made when missing (NULL when the cache is off or full). */
attr_entry *attr_find(session *s, fuse_ino_t ino, int create) {
  if (!s->attrs || ino == 0) return NULL;
  attr_entry **b = &s->attrs[ino % ATTR_BUCKETS];
  for (attr_entry *e = *b; e; e = e->next)
    if (e->ino == ino) return e;
  if (!create || s->attr_count >= ATTR_MAX) return NULL;
  attr_entry *e = calloc(1, sizeof(attr_entry));
  if (!e) return NULL;
  e->ino = ino;
  e->next = *b;
  *b = e;
  s->attr_count++;
  return e;
}

/* Forgets the entry of `ino` unless a change of it is still under way. */
void attr_drop(session *s, fuse_ino_t ino) {
  if (!s->attrs) return;
  for (attr_entry **p = &s->attrs[ino % ATTR_BUCKETS]; *p; p = &(*p)->next) {
    attr_entry *e = *p;
    if (e->ino != ino) continue;
    if (e->inflight > 0) {
      e->valid = 0;
      return;
    }
    *p = e->next;
    free(e);
    s->attr_count--;
    return;
  }
}

/* A change of `ino` arrived (`inflight`: and stays under way until its answer). */
void attr_changing(session *s, fuse_ino_t ino, int inflight) {
  attr_entry *e = attr_find(s, ino, inflight);
  if (!e) return;
  /* A change JavaScript makes (a mode, a time, a size): the rest of `st` is no longer what it shows, so
   * getattr of a file the kernel writes goes to JavaScript from here (its descriptor closed at attrLive off). */
  e->live_stale = 1;
  e->valid = 0;
  e->changed = ++s->epoch;
  if (inflight) e->inflight++;
}

/* A change of `ino` was answered: answers received before it are not kept. */
void attr_changed(session *s, fuse_ino_t ino) {
  attr_entry *e = attr_find(s, ino, 0);
  if (!e) return;
  if (e->inflight > 0) e->inflight--;
  e->changed = ++s->epoch;
}

/* Keeps the attributes of an answer (to the request `info` describes), valid for `timeout` seconds. */
void attr_fill(session *s, const slot_info *info, const struct stat *st, double timeout) {
  if (!s->attrs || timeout <= 0) return;
  pthread_mutex_lock(&s->lock);
  fuse_ino_t ino = st->st_ino;
  int own = info->changes[0] == ino || info->changes[1] == ino;
  attr_entry *e = attr_find(s, ino, 1);
  /* Not while another change is under way, nor from a request older than the last change (unless its own). */
  if (e && e->inflight == 0 && (own || e->changed <= info->epoch)) {
    e->st = *st;
    e->valid = 1;
    e->times_known = 1;
    e->expires = now_s() + timeout;
  }
  pthread_mutex_unlock(&s->lock);
}

/* JavaScript's attrForget: its attributes changed in a way the engine cannot see (a rename, the feed). */
void attr_forget(session *s, fuse_ino_t ino) {
  pthread_mutex_lock(&s->lock);
  attr_entry *e = attr_find(s, ino, 0);
  if (e) {
    e->valid = 0;
    e->changed = ++s->epoch;
  }
  pthread_mutex_unlock(&s->lock);
}

/*
 * With `lock` held: the attributes of a file the kernel writes itself (passthrough) into `st`, the
 * spool's size and times with the rest as kept; 0 when `e` is no such file or its spool cannot be read.
 */
int attr_live(attr_entry *e, struct stat *st) {
  struct stat spool;
  if (!e || !e->has_live_fd || e->live_stale || fstat(e->live_fd, &spool) != 0) return 0;
  *st = e->st;
  st->st_size = spool.st_size;
  st->st_blocks = spool.st_blocks;
  st->st_mtim = spool.st_mtim;
  st->st_ctim = spool.st_ctim;
  return 1;
}

/*
 * The cached attributes of file `ino` while they may answer a getattr (copied into `st`, with the
 * seconds they stay valid); 0 when JavaScript has to answer. Folders always go to JavaScript: the Vfs
 * shows a new folder with the time the service answered its creation, then with the time its listings
 * give (whole seconds), with no request through the mount in between to tell the engine.
 */
int attr_cached(session *s, fuse_ino_t ino, struct stat *st, double *left) {
  int hit = 0;
  pthread_mutex_lock(&s->lock);
  attr_entry *e = attr_find(s, ino, 0);
  if (attr_live(e, st)) {
    /* Written by the kernel: valid this once (the kernel asks again). */
    *left = 0;
    s->getattr_answered++;
    pthread_mutex_unlock(&s->lock);
    return 1;
  }
  if (e && e->valid && e->times_known && e->inflight == 0) {
    double t = e->expires - now_s();
    if (t > 0) {
      *st = e->st;
      *left = t;
      hit = 1;
      s->getattr_answered++;
    }
  }
  pthread_mutex_unlock(&s->lock);
  return hit;
}
