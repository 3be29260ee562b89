/*
 * The log of closes answered here (journalSwitch): its records, their journal ids, and the SHA-1 they carry.
 */
#include "engine_i.h"

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

/* A growable line; `failed` once memory ran out. */
typedef struct {
  char *p;
  size_t len, room;
  int failed;
} line_buf;

static void lb_put(line_buf *b, const char *str, size_t n) {
  if (b->failed) return;
  if (b->len + n > b->room) {
    size_t room = b->room ? b->room : 1024;
    while (room < b->len + n) room *= 2;
    char *grown = realloc(b->p, room);
    if (!grown) {
      b->failed = 1;
      return;
    }
    b->p = grown;
    b->room = room;
  }
  memcpy(b->p + b->len, str, n);
  b->len += n;
}

static void lb_str(line_buf *b, const char *str) {
  lb_put(b, str, strlen(str));
}

static void lb_u64(line_buf *b, uint64_t v) {
  char digits[24];
  int n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)v);
  lb_put(b, digits, (size_t)n);
}

/* A JSON string of valid UTF-8 `str` (as JSON.stringify writes it: quotes, backslashes and controls escaped). */
static void lb_json(line_buf *b, const char *str) {
  lb_put(b, "\"", 1);
  for (const unsigned char *u = (const unsigned char *)str; *u; u++) {
    char esc[8];
    if (*u == '"' || *u == '\\') {
      esc[0] = '\\';
      esc[1] = (char)*u;
      lb_put(b, esc, 2);
    } else if (*u < 0x20) {
      const char *named = *u == '\n' ? "\\n" : *u == '\r' ? "\\r" : *u == '\t' ? "\\t" : *u == '\b' ? "\\b" : *u == '\f' ? "\\f" : NULL;
      if (named) lb_str(b, named);
      else {
        snprintf(esc, sizeof(esc), "\\u%04x", *u);
        lb_put(b, esc, 6);
      }
    } else {
      lb_put(b, (const char *)u, 1);
    }
  }
  lb_put(b, "\"", 1);
}

/* Hex digits of a line's check (the start of the SHA-1 of its JSON), as the upload journal writes them. */
#define LINE_CHECK_CHARS 12

/*
 * The upload journal's put line of `c` (see src/vfs/write-back/journal-records.ts): a check of the JSON, a space,
 * {"put":{entry},"data":"<base64 of the bytes>"}, a newline. NULL when memory ran out.
 */
static char *journal_line(const created_file *c, uint64_t seq, size_t *len) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  char sha1[2 * 20 + 1];
  if (EVP_Digest(c->data ? c->data : "", c->size, md, &md_len, sha1_md(), NULL) != 1 || md_len != 20) return NULL;
  hex_of(md, 20, sha1);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  uint64_t now_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
  line_buf b = { 0 };
  lb_put(&b, "0123456789ab ", LINE_CHECK_CHARS + 1);
  lb_str(&b, "{\"put\":{\"id\":\"");
  lb_str(&b, c->id);
  lb_str(&b, "\",\"library\":");
  lb_json(&b, c->library);
  lb_str(&b, ",\"fullpath\":");
  lb_json(&b, c->fullpath);
  lb_str(&b, ",\"size\":");
  lb_u64(&b, c->size);
  lb_str(&b, ",\"mtimeMs\":");
  /* A file the kernel wrote: the spool's time, as JavaScript shows it (it fstats the same spool). */
  lb_u64(&b, c->spool_mtime_ns > 0 ? (uint64_t)c->spool_mtime_ns / 1000000 : now_ms);
  lb_str(&b, ",\"createdMs\":");
  lb_u64(&b, now_ms);
  lb_str(&b, ",\"seq\":");
  lb_u64(&b, seq);
  lb_str(&b, ",\"sha1\":\"");
  lb_str(&b, sha1);
  lb_str(&b, "\"},\"data\":\"");
  /* The base64 of the bytes is written in place (EVP_EncodeBlock adds a NUL, overwritten by the tail). */
  size_t b64 = 4 * ((c->size + 2) / 3);
  if (!b.failed && b.len + b64 + 3 > b.room) {
    size_t want = b.len + b64 + 3;
    char *room = realloc(b.p, want);
    if (room) {
      b.p = room;
      b.room = want;
    } else b.failed = 1;
  }
  if (b.failed) {
    free(b.p);
    return NULL;
  }
  if (c->size > 0) EVP_EncodeBlock((unsigned char *)b.p + b.len, (const unsigned char *)c->data, (int)c->size);
  b.len += b64;
  lb_put(&b, "\"}\n", 3);
  if (b.failed) {
    free(b.p);
    return NULL;
  }
  const char *json = b.p + LINE_CHECK_CHARS + 1;
  size_t json_len = b.len - (LINE_CHECK_CHARS + 1) - 1;
  char check[2 * 20 + 1];
  if (EVP_Digest(json, json_len, md, &md_len, sha1_md(), NULL) != 1) {
    free(b.p);
    return NULL;
  }
  hex_of(md, 20, check);
  memcpy(b.p, check, LINE_CHECK_CHARS);
  *len = b.len;
  return b.p;
}

/* The next seq of a journal record: as JavaScript draws them (microseconds, above the last one). */
static uint64_t journal_next_seq(session *s) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  uint64_t us = (uint64_t)now.tv_sec * 1000000 + (uint64_t)now.tv_nsec / 1000;
  s->journal_seq = us > s->journal_seq ? us : s->journal_seq + 1;
  return s->journal_seq;
}

/*
 * Appends the record of `c` to the log: its number (from 1), or 0 when it was not written (no log, a
 * full or failing disk: JavaScript answers the close then). `line`/`len` get the line written.
 */
uint64_t journal_append(session *s, created_file *c, char **line, size_t *len) {
  uint64_t record = 0;
  pthread_mutex_lock(&s->journal_lock);
  int fd = s->journal_fd;
  *line = fd >= 0 ? journal_line(c, journal_next_seq(s), len) : NULL;
  if (*line && s->journal_torn) {
    if (write(fd, "\n", 1) == 1) {
      s->journal_torn = 0;
      s->journal_bytes++;
    }
  }
  if (*line && !s->journal_torn) {
    size_t done = 0;
    while (done < *len) {
      ssize_t n = write(fd, *line + done, *len - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += (size_t)n;
    }
    if (done == *len) {
      s->journal_bytes += (off_t)done;
      record = ++s->journal_records;
    } else if (done > 0 && ftruncate(fd, s->journal_bytes) != 0) {
      s->journal_torn = 1;
    }
  }
  pthread_mutex_unlock(&s->journal_lock);
  if (!record) {
    free(*line);
    *line = NULL;
  }
  return record;
}
