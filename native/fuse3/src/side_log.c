/*
 * The log of closes answered here (journalSwitch): the engine's close records (close_record.c) appended
 * to it, the journal ids they carry, and SHA-1.
 */
#include "engine_i.h"
#include <sys/statvfs.h>
#include <unistd.h>

void hex_of(const unsigned char *bytes, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  out[2 * n] = 0;
}

/* Random bytes a thread cuts journal ids from: one call to the random source for 512 ids. */
#define ID_POOL_BYTES 4096
static __thread unsigned char id_pool[ID_POOL_BYTES];
static __thread size_t id_pool_at = ID_POOL_BYTES;

/* A new journal id (16 hex digits) into `id`; 0 when the system gives no random bytes. */
int new_journal_id(char id[17]) {
  if (id_pool_at + 8 > ID_POOL_BYTES) {
    size_t got = 0;
    while (got < ID_POOL_BYTES) {
      ssize_t n = getrandom(id_pool + got, ID_POOL_BYTES - got, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return 0;
      got += (size_t)n;
    }
    id_pool_at = 0;
  }
  hex_of(id_pool + id_pool_at, 8, id);
  id_pool_at += 8;
  return 1;
}

/* SHA-1, looked up once (each EVP_sha1() digest otherwise looks the algorithm up in the providers again). */
static EVP_MD *sha1_fetched;
static pthread_once_t sha1_once = PTHREAD_ONCE_INIT;
static void sha1_fetch(void) {
  sha1_fetched = EVP_MD_fetch(NULL, "SHA1", NULL);
}
const EVP_MD *sha1_md(void) {
  pthread_once(&sha1_once, sha1_fetch);
  return sha1_fetched ? sha1_fetched : EVP_sha1();
}

/* The close record of `c` (see close_record.c), numbered `seq`; NULL when memory ran out. */
static unsigned char *close_record_of(const created_file *c, uint64_t seq, size_t *len) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  close_record_fields f;
  memset(&f, 0, sizeof(f));
  memcpy(f.id, c->id, sizeof(f.id));
  f.library = c->library;
  f.fullpath = c->fullpath;
  /* A file the kernel wrote: the spool's time, as JavaScript shows it (it fstats the same spool). */
  f.mtime_ns = c->spool_mtime_ns > 0 ? c->spool_mtime_ns : (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
  f.created_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
  f.seq = seq;
  f.data = c->data;
  f.size = c->size;
  return close_record_encode(&f, len);
}

/* The next seq of a close record: as JavaScript draws them (microseconds, above the last one). */
static uint64_t journal_next_seq(session *s) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  uint64_t us = (uint64_t)now.tv_sec * 1000000 + (uint64_t)now.tv_nsec / 1000;
  s->journal_seq = us > s->journal_seq ? us : s->journal_seq + 1;
  return s->journal_seq;
}

/*
 * The log's disk has `spool_min_free` bytes free beyond `more` (records waiting for JavaScript and the
 * one about to be written); for root, the blocks kept for it count. Always, when no minimum is set.
 */
int journal_has_room(session *s, uint64_t more) {
  if (s->spool_min_free == 0) return 1;
  struct statvfs st;
  pthread_mutex_lock(&s->journal_lock);
  int got = s->journal_fd >= 0 && fstatvfs(s->journal_fd, &st) == 0;
  pthread_mutex_unlock(&s->journal_lock);
  if (!got) return 0;
  uint64_t blocks = geteuid() == 0 ? st.f_bfree : st.f_bavail;
  return blocks * (uint64_t)st.f_frsize >= s->spool_min_free + more;
}

/*
 * Appends the close record of `c` to the log: its number (from 1), or 0 when it was not written (no log,
 * a full or failing disk: JavaScript answers the close then). `record`/`len` get the record written.
 * A record written part way is cut off again; when that fails too, it stays, and the log's reader skips
 * it (it does not match its check) and finds the records after it.
 */
uint64_t journal_append(session *s, created_file *c, char **record, size_t *len) {
  uint64_t number = 0;
  pthread_mutex_lock(&s->journal_lock);
  int fd = s->journal_fd;
  unsigned char *r = fd >= 0 ? close_record_of(c, journal_next_seq(s), len) : NULL;
  if (r) {
    size_t done = 0;
    while (done < *len) {
      ssize_t n = write(fd, r + done, *len - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += (size_t)n;
    }
    if (done == *len) {
      s->journal_bytes += (off_t)done;
      number = ++s->journal_records;
    } else if (done > 0 && ftruncate(fd, s->journal_bytes) != 0) {
      /* Stays in the log, skipped by its reader: the next record goes after it. */
      s->journal_bytes += (off_t)done;
    }
  }
  pthread_mutex_unlock(&s->journal_lock);
  if (!number) {
    free(r);
    r = NULL;
  }
  *record = (char *)r;
  return number;
}
