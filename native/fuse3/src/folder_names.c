/*
 * The names of folders whose every name JavaScript gave: lookups of other names answered "no such
 * entry" here, creates there answered here (see "Names of folders" in engine_i.h).
 */
#include "engine_i.h"

/* ---- names of folders (all with `lock` held) -------------------------------------------------- */

/*
 * For a folder whose every name JavaScript told the engine (a folder just made through the mount is
 * empty), a lookup of a name it does not hold is answered here: no such entry. The knowledge lasts as
 * long as the kernel keeps a negative entry (`attrTimeoutS`), so a name made elsewhere shows no later
 * than without it. Every request that may add a name to a folder (create, mkdir, rename) adds it when it
 * arrives, before it is answered; names removed stay (their lookups go to JavaScript). JavaScript's list
 * is refused when any such request arrived after the request it answers, or is still unanswered.
 */


static uint32_t name_hash(const char *name) {
  uint32_t h = 2166136261u;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 16777619u;
  return h;
}

name_set *names_find(session *s, fuse_ino_t ino) {
  if (!s->names) return NULL;
  for (name_set *n = s->names[ino % NAME_SET_BUCKETS]; n; n = n->next)
    if (n->ino == ino) return n;
  return NULL;
}

void names_free(session *s, name_set *n) {
  for (uint32_t i = 0; i < n->room; i++) free(n->slots[i]);
  s->names_held -= n->count;
  free(n->slots);
  free(n->library);
  free(n->fullpath);
  free(n);
}

void names_drop(session *s, fuse_ino_t ino) {
  if (!s->names) return;
  for (name_set **p = &s->names[ino % NAME_SET_BUCKETS]; *p; p = &(*p)->next) {
    if ((*p)->ino != ino) continue;
    name_set *n = *p;
    *p = n->next;
    s->name_set_count--;
    names_free(s, n);
    return;
  }
}

int names_holds(const name_set *n, const char *name) {
  for (uint32_t i = name_hash(name) & (n->room - 1);; i = (i + 1) & (n->room - 1)) {
    if (!n->slots[i]) return 0;
    if (strcmp(n->slots[i], name) == 0) return 1;
  }
}

/* Adds `name` (a copy) to `n`; 0 when memory or the bound ran out (the caller drops the set). */
int names_put(session *s, name_set *n, const char *name) {
  if (names_holds(n, name)) return 1;
  if (s->names_held >= NAMES_HELD_MAX) return 0;
  if ((n->count + 1) * 2 > n->room) {
    uint32_t room = n->room * 2;
    char **grown = calloc(room, sizeof(char *));
    if (!grown) return 0;
    for (uint32_t i = 0; i < n->room; i++) {
      char *v = n->slots[i];
      if (!v) continue;
      uint32_t j = name_hash(v) & (room - 1);
      while (grown[j]) j = (j + 1) & (room - 1);
      grown[j] = v;
    }
    free(n->slots);
    n->slots = grown;
    n->room = room;
  }
  char *copy = strdup(name);
  if (!copy) return 0;
  uint32_t i = name_hash(name) & (n->room - 1);
  while (n->slots[i]) i = (i + 1) & (n->room - 1);
  n->slots[i] = copy;
  n->count++;
  s->names_held++;
  return 1;
}

/* A request that may add `name` to folder `ino` arrived. */
void names_adding(session *s, fuse_ino_t ino, const char *name) {
  s->names_epoch = ++s->epoch;
  s->names_inflight++;
  name_set *n = names_find(s, ino);
  if (n && !names_put(s, n, name)) names_drop(s, ino);
}

/*
 * Valid UTF-8 without U+FFFD (JavaScript's names are strings: other bytes, and the replacement character
 * it cannot tell from them, are left to it).
 */
int utf8_valid(const char *p) {
  const unsigned char *u = (const unsigned char *)p;
  while (*u) {
    if (u[0] == 0xef && u[1] == 0xbf && u[2] == 0xbd) return 0;
    int extra = *u < 0x80 ? 0 : (*u & 0xe0) == 0xc0 ? 1 : (*u & 0xf0) == 0xe0 ? 2 : (*u & 0xf8) == 0xf0 ? 3 : -1;
    if (extra < 0 || (extra == 1 && *u < 0xc2)) return 0;
    u++;
    for (int i = 0; i < extra; i++, u++)
      if ((*u & 0xc0) != 0x80) return 0;
  }
  return 1;
}

void names_forget(session *s, fuse_ino_t ino) {
  pthread_mutex_lock(&s->lock);
  names_drop(s, ino);
  pthread_mutex_unlock(&s->lock);
}
