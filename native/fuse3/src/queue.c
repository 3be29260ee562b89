/*
 * Request ids (a slot of a table and its generation) and the queue of records handed to JavaScript.
 */
#include "engine_i.h"

/* ---- request ids ---------------------------------------------------------------------------- */

/*
 * Gives `req` an id; `change`/`change2`: inodes whose attributes it may change (0: none); `name`: the
 * name it may add to folder `names_folder` (NULL: none).
 */
static double slot_put(session *s, fuse_req_t req, fuse_ino_t change, fuse_ino_t change2, fuse_ino_t names_folder, const char *name) {
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
  sl->changes[0] = sl->changes[1] = 0;
  if (change) attr_changing(s, change, 1);
  if (change2 && change2 != change) attr_changing(s, change2, 1);
  if (s->attrs) {
    sl->changes[0] = change;
    sl->changes[1] = change2 != change ? change2 : 0;
  }
  sl->adds_name = name != NULL;
  if (name) names_adding(s, names_folder, name);
  sl->epoch = s->epoch;
  sl->gen = (sl->gen + 1) & 0xffffffu;
  double id = (double)sl->gen * (double)SLOT_MAX + (double)idx;
  pthread_mutex_unlock(&s->lock);
  return id;
}

/*
 * Takes the request of `id` out of the table; NULL if the id is not (or no longer) pending. The changes
 * it was making count as answered from here on; `info` (optional) gets what the attribute cache needs.
 */
fuse_req_t slot_take_info(session *s, double id, slot_info *info) {
  if (!(id >= 0)) return NULL;
  uint64_t v = (uint64_t)id;
  uint32_t idx = (uint32_t)(v & (SLOT_MAX - 1));
  uint32_t gen = (uint32_t)(v >> SLOT_BITS);
  fuse_req_t req = NULL;
  pthread_mutex_lock(&s->lock);
  if (!s->closed && idx < s->slot_count && s->slots[idx].used && s->slots[idx].gen == gen) {
    req = s->slots[idx].req;
    slot *sl = &s->slots[idx];
    for (int i = 0; i < 2; i++)
      if (sl->changes[i]) attr_changed(s, sl->changes[i]);
    if (sl->adds_name) s->names_inflight--;
    if (info) {
      info->epoch = sl->epoch;
      info->changes[0] = sl->changes[0];
      info->changes[1] = sl->changes[1];
      info->adds_name = sl->adds_name;
    }
    s->slots[idx].used = 0;
    s->slots[idx].req = NULL;
    s->free_slots[s->free_count++] = idx;
  }
  pthread_mutex_unlock(&s->lock);
  return req;
}

fuse_req_t slot_take(session *s, double id) {
  return slot_take_info(s, id, NULL);
}

/* The slot of `id` while it is pending (with `lock` held): NULL otherwise. */
slot *slot_peek(session *s, double id) {
  if (!(id >= 0)) return NULL;
  uint64_t v = (uint64_t)id;
  uint32_t idx = (uint32_t)(v & (SLOT_MAX - 1));
  uint32_t gen = (uint32_t)(v >> SLOT_BITS);
  if (s->closed || idx >= s->slot_count || !s->slots[idx].used || s->slots[idx].gen != gen) return NULL;
  return &s->slots[idx];
}

/* ---- the queue to JavaScript ---------------------------------------------------------------- */

/*
 * Queues a record without waking JavaScript: it goes with the next request that does (the flush that
 * follows a small file's write and times, in one crossing). Records of answered requests only.
 */
void enqueue_quiet(session *s, queued *q) {
  pthread_mutex_lock(&s->lock);
  q->next = NULL;
  if (s->tail) s->tail->next = q;
  else s->head = q;
  s->tail = q;
  pthread_mutex_unlock(&s->lock);
}

void enqueue(session *s, queued *q) {
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

queued *new_queued_naming(session *s, int op, fuse_req_t req, fuse_ino_t ino, fuse_ino_t change, fuse_ino_t change2, fuse_ino_t names_folder, const char *name) {
  queued *q = calloc(1, sizeof(queued));
  if (!q) {
    if (req) fuse_reply_err(req, ENOMEM);
    return NULL;
  }
  q->op = op;
  q->ino = ino;
  if (req) {
    q->id = slot_put(s, req, change, change2, names_folder, name);
    if (q->id < 0) {
      free(q);
      fuse_reply_err(req, EBUSY);
      return NULL;
    }
  }
  return q;
}

queued *new_queued_changing(session *s, int op, fuse_req_t req, fuse_ino_t ino, fuse_ino_t change, fuse_ino_t change2) {
  return new_queued_naming(s, op, req, ino, change, change2, 0, NULL);
}

queued *new_queued(session *s, int op, fuse_req_t req, fuse_ino_t ino) {
  return new_queued_changing(s, op, req, ino, 0, 0);
}

char *copy_bytes(const char *p, size_t n) {
  char *c = malloc(n ? n : 1);
  if (c && n) memcpy(c, p, n);
  return c;
}

void free_queued(queued *q) {
  free(q->name);
  free(q->name2);
  free(q->data);
  free(q);
}
