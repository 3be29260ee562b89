/*
 * FUSE session over libfuse 3's low-level API, for Node (N-API).
 *
 * Reader threads take requests from the session's /dev/fuse descriptor (fuse_session_receive_buf +
 * fuse_session_process_buf); with FUSE over io_uring (rings.c), each CPU's ring thread hands libfuse the
 * requests of that CPU instead, and the handlers below run the same on either. Each request is copied
 * into a queued record (names, and the data of writes and setxattr, into memory of its own: libfuse
 * reuses its buffer for the next request) and the queue is handed to JavaScript in batches: one threadsafe-function call whenever the queue goes from
 * empty to non-empty, which takes everything queued by the time the main thread runs it.
 *
 * JavaScript answers each request with one of the reply functions, by the id it got. Ids name a slot
 * of a table and carry the slot's generation, so an id answered twice (or after the session is gone)
 * is refused instead of touching a freed request.
 *
 * Direct spool writes: a file handle JavaScript has given a spool descriptor (spoolAttach) has its
 * writes answered here, on the reader thread: the request's data is written into the spool with
 * pwrite straight from libfuse's buffer, SHA-1-hashed while the writes come front to back, and the
 * kernel answered. JavaScript only gets a record (handle, offset, length, or the errno of a failed
 * write) in the same queue as the requests, before any request the kernel sends after the answer.
 *
 * Attribute cache: the attributes of each answer JavaScript gives (lookup, getattr, setattr, create,
 * mkdir) are kept here for as long as the kernel was told to keep them, and a getattr of a file the
 * kernel sends again (after a change of its own made it drop its copy) is answered from them.
 * Every request that may change an inode's attributes drops them when it arrives and keeps any answer
 * from refilling them until it is itself answered; an answer to a request received before a change is
 * never kept. With the writeback cache, the small writes of a new file and the times the kernel writes
 * back at close are answered here too (see "Answered here" below) and reach JavaScript as records.
 *
 * Names of folders: for a folder whose every name JavaScript gave (a folder just made, a listing the
 * Vfs holds), lookups of other names are answered "no such entry" here, and creates there are answered
 * here too (the engine numbers the new file's inode and handle); JavaScript gets the create as a record,
 * ahead of anything about the file, and makes it in the Vfs.
 */
#define _GNU_SOURCE /* sync_file_range */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <node_api.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "rings.h"

enum op_code {
  OP_LOOKUP = 1, OP_FORGET = 2, OP_GETATTR = 3, OP_SETATTR = 4, OP_MKDIR = 5, OP_UNLINK = 6,
  OP_RMDIR = 7, OP_RENAME = 8, OP_OPEN = 9, OP_READ = 10, OP_WRITE = 11, OP_FLUSH = 12,
  OP_RELEASE = 13, OP_FSYNC = 14, OP_OPENDIR = 15, OP_READDIR = 16, OP_RELEASEDIR = 17,
  OP_FSYNCDIR = 18, OP_STATFS = 19, OP_SETXATTR = 20, OP_GETXATTR = 21, OP_LISTXATTR = 22,
  OP_REMOVEXATTR = 23, OP_ACCESS = 24, OP_CREATE = 25, OP_WROTE = 26, OP_READDIRPLUS = 27, OP_HASHED = 28,
  OP_INIT = 98, OP_END = 99,
};

#define SPOOL_AHEAD_MAX 64
/* Background syncs asked for and not yet made (more are skipped: the next one covers their bytes). */
#define SYNC_QUEUE_MAX 8
/* How far the hash may fall behind the bytes written before a write waits for it (bounds the close's wait). */
#define SPOOL_HASH_LAG_MAX (64ull * 1024 * 1024)
/* The hash thread reads the spool back in pieces of this size. */
#define SPOOL_HASH_CHUNK (256 * 1024)

/*
 * A file handle whose writes go straight into its spool (see "Direct spool writes" above). Guarded by
 * the session's `spool_lock`, apart from what the hash thread does outside it while `hashing` is set
 * (it reads the spool and updates `sha`: nothing else touches `sha` meanwhile).
 */
typedef struct spool_writer {
  struct spool_writer *next;
  uint64_t fh;
  /* A duplicate of JavaScript's descriptor: the engine's own, closed with the writer, so the hash thread
   * may still read the spool after JavaScript has closed its descriptor. */
  int fd;
  /*
   * The SHA-1 of the spool's first `hashed` bytes, computed by the hash thread, which reads them back
   * from the spool (the page cache) behind the writes: the bytes [0, written) are all written, `hashed`
   * follows. Writes beyond `written` (the kernel's writeback sends several at once, not always in order,
   * and several reader threads make them in parallel) are remembered in `ahead` until the bytes before
   * them are written. A write below `written`, or too many ranges ahead, ends the hash (`hash_broken`:
   * the seal then hashes the spool).
   */
  EVP_MD_CTX *sha;
  int hash_broken;
  int hashing;
  uint64_t written;
  uint64_t hashed;
  struct { uint64_t start, end; } ahead[SPOOL_AHEAD_MAX];
  int nahead;
  /* Writes made, and the end of the furthest one. */
  uint64_t count;
  uint64_t end;
  /* The errno of the first failed write: every later write answers it too. */
  int err;
  /* Detached with its hash to finish: the number of the HASHED record that reports it (0: none wanted). */
  uint64_t token;
  /* The hashed bytes whose writeback to disk the hash thread has started (see `writeback_ahead`). */
  uint64_t flushing;
  /* The bytes of `flushing` a background fdatasync was asked for (see `sync_ahead`). */
  uint64_t syncing;
} spool_writer;

static void spool_free(spool_writer *w);
struct session;
static void *hasher_main(void *arg);
static void *syncer_main(void *arg);
static void stop_hasher(struct session *s);

/* One request waiting for JavaScript. */
typedef struct queued {
  struct queued *next;
  int op;
  double id;
  fuse_ino_t ino;
  fuse_ino_t ino2;
  int has_fh;
  uint64_t fh;
  int64_t offset;
  uint64_t size;
  int flags;
  int mode;
  int valid;
  uint32_t uid, gid;
  double atime_ms, mtime_ms;
  char *name;
  char *name2;
  char *data;
  size_t data_len;
  /* Answered here already: JavaScript only applies it (write, setattr of times). */
  int answered;
  /* A create answered with a backing file: its id (0: none). */
  int backing;
  /* A close answered here of a file the kernel wrote (passthrough): the spool's modification time (ns) when its bytes were read (0: none). */
  int64_t spool_mtime_ns;
} queued;

typedef struct {
  fuse_req_t req;
  uint32_t gen;
  int used;
  /* The attribute cache's epoch when the request arrived, and the inodes it may change (0: none). */
  uint64_t epoch;
  fuse_ino_t changes[2];
  /* May add a name to a folder (create, mkdir, rename): counted in `names_inflight` until answered. */
  int adds_name;
} slot;

/* What slot_take found about the request, for the attribute cache. */
typedef struct {
  uint64_t epoch;
  fuse_ino_t changes[2];
  int adds_name;
} slot_info;

/* Attributes of one inode as JavaScript last answered them (see "Attribute cache" above). */
typedef struct attr_entry {
  struct attr_entry *next;
  fuse_ino_t ino;
  struct stat st;
  /* st may answer a getattr until `expires` (CLOCK_MONOTONIC seconds). */
  int valid;
  /* 0 after a write answered here: the times JavaScript will show are not known, only the size. */
  int times_known;
  double expires;
  /* The epoch of the last change seen, and the changing requests not answered yet. */
  uint64_t changed;
  int inflight;
  /* Written by the kernel itself (passthrough): a descriptor of its spool, whose size and times answer
   * getattr with the rest of `st` (has_live_fd: live_fd is open). */
  int has_live_fd, live_fd, live_stale;
} attr_entry;

#define ATTR_BUCKETS 4096
#define ATTR_MAX 65536
/* Writes answered here: those that end within a small file's first bytes (held in memory by the Vfs). */
#define ANSWERED_WRITE_END (64 * 1024)
/* Bytes of answered writes queued and not yet handed to JavaScript, at most. */
#define ANSWERED_BYTES_MAX (8u * 1024 * 1024)
/* Names of the spool pool read at once, and their longest (see spool_from_pool). */
#define POOL_BATCH 256
#define POOL_NAME_MAX 64
/* Spools the maker keeps made ahead, and below how many a create wakes it. */
#define READY_MAX 64
#define READY_LOW 32
typedef struct {
  char id[17];
  int fd;
} ready_spool;
/* Inode and handle numbers of files created here: above any JavaScript gives (counters there). */
#define CREATED_INO_BASE (1ull << 44)
#define CREATED_FH_BASE (1ull << 32)
/* A RELEASE record's flags: the create was interrupted, the kernel never got the file. */
#define RELEASE_NEVER_GIVEN 1

typedef struct session {
  struct fuse_session *se;
  /* FUSE over io_uring (rings.c): the session's reads and answers go through it. */
  fuse_rings *rings;
  int rings_want, ring_depth;
  napi_threadsafe_function tsfn;
  pthread_t readers[8];
  int reader_count;
  int readers_running;
  int end_sent;

  pthread_mutex_t lock;
  queued *head, *tail;
  int scheduled;

  slot *slots;
  uint32_t slot_count;
  uint32_t *free_slots;
  uint32_t free_count;
  int closed;
  /* Notifications being written (destroy waits for them). */
  int notifying;

  /* Handles writing straight into their spools, and their books; guarded by `spool_lock`. */
  pthread_mutex_t spool_lock;
  spool_writer *spools;
  /* Held shared by each direct write from before it looks up its writer until its record is queued;
   * exclusive by attach and detach, so no write reaches a spool after its detach. */
  pthread_rwlock_t spool_io;
  /* Numbers every direct write's record (across handles), so a record is told apart from later attachments'. */
  uint64_t spool_seq;
  /* The hash thread: follows the writes of every writer; finishes the hashes of detached ones (`finishing`)
   * and reports each in a HASHED record. `hash_work` wakes it, `hash_progress` wakes writers waiting for it. */
  pthread_t hasher;
  int hasher_started, hasher_stop;
  pthread_cond_t hash_work, hash_progress;
  spool_writer *finishing;
  uint64_t hash_token;
  /* Once this many hashed bytes of a spool are not yet on their way to disk, the hash thread starts their
   * writeback (sync_file_range, not waiting): a later fsync finds them written. 0: never. */
  uint64_t writeback_ahead;
  /* Writebacks started so far (guarded by spool_lock). */
  uint64_t spool_writebacks;
  /*
   * Once this many bytes of a spool's writeback were started since its last background sync, the sync
   * thread fdatasyncs it (on a duplicate descriptor, waiting for nobody): the disk's cache is emptied
   * while the data still comes, so the application's own fsync at the end has only the last of it to wait
   * for. 0: never. The descriptors to sync wait in `sync_fds` (guarded by spool_lock).
   */
  uint64_t sync_ahead;
  pthread_t syncer;
  int syncer_started, syncer_stop;
  pthread_cond_t sync_work;
  int sync_fds[SYNC_QUEUE_MAX];
  int sync_count;
  uint64_t spool_syncs;

  /* Asked for at INIT. */
  unsigned max_write, max_readahead, max_background, congestion_threshold;
  int writeback, async_read;
  /* The OP_INIT record, queued once INIT is answered. */
  struct queued *init_record;
  /* Passthrough wanted when the kernel offers it (instead of the writeback cache: see "Passthrough"), and
   * refused to this process (no backing file may be registered: no CAP_SYS_ADMIN). */
  int passthrough_want, backing_denied;
  /* What the kernel agreed to, reported once with OP_INIT. */
  unsigned got_max_write, got_max_readahead, got_max_background;
  int got_writeback;
  char *mountpoint;

  /* The attribute cache (guarded by `lock`). */
  int attr_cache;
  attr_entry **attrs;
  uint32_t attr_count;
  uint64_t epoch;
  /* Small writes and setattr of times answered here (writeback cache only). */
  int answer_small;
  size_t answered_bytes;
  /* What was answered here, for the mount's counters. */
  uint64_t getattr_answered, writes_answered, times_answered, lookups_answered, modes_answered;

  /* The names of folders whose every name is known here (guarded by `lock`; see "Names of folders"). */
  struct name_set **names;
  uint32_t name_set_count;
  uint64_t names_held;
  /* The epoch of the last request that may add a name to a folder, and how many of them are unanswered. */
  uint64_t names_epoch;
  int names_inflight;
  /* Files created here (answer_create): numbered from their own ranges; their owner and timeout. */
  int answer_creates;
  uint64_t next_ino, next_fh;
  uint32_t create_uid, create_gid;
  double create_timeout;
  uint64_t creates_answered;
  /*
   * Closes answered here (see "Closes answered here"): the files created here whose bytes the engine
   * follows (guarded by `lock`), and the log their journal records go to (`journal_lock`: one writer).
   */
  struct created_file *created;
  uint32_t created_count;
  size_t created_bytes;
  /* Renames so far: a path the engine was told before one of them may be stale. */
  uint64_t paths_epoch;
  pthread_mutex_t journal_lock;
  int journal_fd;
  /* The upload journal's spool folder (spoolFolder): files created here with passthrough get their spool there. */
  int spool_dir_fd;
  /* Its pool of emptied spools (a spool is taken from there before one is made), and names read from it. */
  int pool_dir_fd;
  pthread_mutex_t pool_lock;
  char (*pool_names)[POOL_NAME_MAX];
  int pool_count;
  double pool_empty_until;
  /*
   * Spools made ahead by the spool maker thread (see "Spools made ahead"), each under a journal id of its
   * own and open: a create takes one and makes no file. Guarded by pool_lock, as is the rest: the spool
   * folder's generation (a change of folder drops what was made for the old one), and whether the maker is
   * making one now (the folders it uses stay open until it is done).
   */
  ready_spool ready[READY_MAX];
  int ready_count;
  /* Creates that took a spool made ahead, so far. */
  uint64_t ready_taken;
  uint64_t spool_gen;
  int maker_busy, maker_stop, maker_started;
  pthread_t maker;
  pthread_cond_t maker_work, maker_idle;
  /* A write to the log failed part way and could not be undone: the next record starts on a line of its own. */
  int journal_torn;
  /* Bytes of the log file (a part-written record is cut off again). */
  off_t journal_bytes;
  /* Records written to the logs so far (numbered from 1, across the files), and the last seq given. */
  uint64_t journal_records;
  uint64_t journal_seq;
  uint64_t closes_answered;

  /* The null file system (see below): its nodes by number, and by folder and name. */
  struct null_node **null_by_ino;
  fuse_ino_t null_count, null_room;
  struct null_node **null_by_name;
  /* With passthrough and a spool folder: the name (a number) of the next file a create is answered with. */
  unsigned null_backing_next;
} session;

/* See "Closes answered here". */
static void created_spoil(session *s, fuse_ino_t ino);
static uint64_t paths_changed(session *s, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname);
static void created_unlinked(session *s, fuse_ino_t parent, const char *name);
/* See "Passthrough". */
static int backing_open(session *s, int fd);
static int backing_close(session *s, int id);
static int reply_create_backing(fuse_req_t req, const struct fuse_entry_param *e, uint64_t fh, int backing);

#define SLOT_BITS 20
#define SLOT_MAX (1u << SLOT_BITS)

/* ---- the attribute cache (all with `lock` held) ---------------------------------------------- */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The entry of `ino`; with `create`, made when missing (NULL when the cache is off or full). */
static attr_entry *attr_find(session *s, fuse_ino_t ino, int create) {
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
static void attr_drop(session *s, fuse_ino_t ino) {
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
static void attr_changing(session *s, fuse_ino_t ino, int inflight) {
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
static void attr_changed(session *s, fuse_ino_t ino) {
  attr_entry *e = attr_find(s, ino, 0);
  if (!e) return;
  if (e->inflight > 0) e->inflight--;
  e->changed = ++s->epoch;
}

/* Keeps the attributes of an answer (to the request `info` describes), valid for `timeout` seconds. */
static void attr_fill(session *s, const slot_info *info, const struct stat *st, double timeout) {
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
static void attr_forget(session *s, fuse_ino_t ino) {
  pthread_mutex_lock(&s->lock);
  attr_entry *e = attr_find(s, ino, 0);
  if (e) {
    e->valid = 0;
    e->changed = ++s->epoch;
  }
  pthread_mutex_unlock(&s->lock);
}

/* ---- names of folders (all with `lock` held) -------------------------------------------------- */

/*
 * For a folder whose every name JavaScript told the engine (a folder just made through the mount is
 * empty), a lookup of a name it does not hold is answered here: no such entry. The knowledge lasts as
 * long as the kernel keeps a negative entry (`attrTimeoutS`), so a name made elsewhere shows no later
 * than without it. Every request that may add a name to a folder (create, mkdir, rename) adds it when it
 * arrives, before it is answered; names removed stay (their lookups go to JavaScript). JavaScript's list
 * is refused when any such request arrived after the request it answers, or is still unanswered.
 */
typedef struct name_set {
  struct name_set *next;
  fuse_ino_t ino;
  double expires;
  /* Where the folder is in the Vfs (its library and library-relative path), when JavaScript said so, and
   * the paths_epoch they were told in (a later rename makes them unknown). */
  char *library, *fullpath;
  uint64_t paths_epoch;
  /* Open addressing; `room` is a power of two. */
  uint32_t count, room;
  char **slots;
} name_set;

#define NAME_SET_BUCKETS 1024
#define NAME_SETS_MAX 4096
/* Names held in all sets at most; a set that would pass it is dropped. */
#define NAMES_HELD_MAX (1u << 20)

static uint32_t name_hash(const char *name) {
  uint32_t h = 2166136261u;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 16777619u;
  return h;
}

static name_set *names_find(session *s, fuse_ino_t ino) {
  if (!s->names) return NULL;
  for (name_set *n = s->names[ino % NAME_SET_BUCKETS]; n; n = n->next)
    if (n->ino == ino) return n;
  return NULL;
}

static void names_free(session *s, name_set *n) {
  for (uint32_t i = 0; i < n->room; i++) free(n->slots[i]);
  s->names_held -= n->count;
  free(n->slots);
  free(n->library);
  free(n->fullpath);
  free(n);
}

static void names_drop(session *s, fuse_ino_t ino) {
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

static int names_holds(const name_set *n, const char *name) {
  for (uint32_t i = name_hash(name) & (n->room - 1);; i = (i + 1) & (n->room - 1)) {
    if (!n->slots[i]) return 0;
    if (strcmp(n->slots[i], name) == 0) return 1;
  }
}

/* Adds `name` (a copy) to `n`; 0 when memory or the bound ran out (the caller drops the set). */
static int names_put(session *s, name_set *n, const char *name) {
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
static void names_adding(session *s, fuse_ino_t ino, const char *name) {
  s->names_epoch = ++s->epoch;
  s->names_inflight++;
  name_set *n = names_find(s, ino);
  if (n && !names_put(s, n, name)) names_drop(s, ino);
}

/*
 * Valid UTF-8 without U+FFFD (JavaScript's names are strings: other bytes, and the replacement character
 * it cannot tell from them, are left to it).
 */
static int utf8_valid(const char *p) {
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
static fuse_req_t slot_take_info(session *s, double id, slot_info *info) {
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

static fuse_req_t slot_take(session *s, double id) {
  return slot_take_info(s, id, NULL);
}

/* The slot of `id` while it is pending (with `lock` held): NULL otherwise. */
static slot *slot_peek(session *s, double id) {
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
static void enqueue_quiet(session *s, queued *q) {
  pthread_mutex_lock(&s->lock);
  q->next = NULL;
  if (s->tail) s->tail->next = q;
  else s->head = q;
  s->tail = q;
  pthread_mutex_unlock(&s->lock);
}

static void enqueue(session *s, queued *q) {
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

static queued *new_queued_naming(session *s, int op, fuse_req_t req, fuse_ino_t ino, fuse_ino_t change, fuse_ino_t change2, fuse_ino_t names_folder, const char *name) {
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

static queued *new_queued_changing(session *s, int op, fuse_req_t req, fuse_ino_t ino, fuse_ino_t change, fuse_ino_t change2) {
  return new_queued_naming(s, op, req, ino, change, change2, 0, NULL);
}

static queued *new_queued(session *s, int op, fuse_req_t req, fuse_ino_t ino) {
  return new_queued_changing(s, op, req, ino, 0, 0);
}

static char *copy_bytes(const char *p, size_t n) {
  char *c = malloc(n ? n : 1);
  if (c && n) memcpy(c, p, n);
  return c;
}

static void free_queued(queued *q) {
  free(q->name);
  free(q->name2);
  free(q->data);
  free(q);
}

#define SESSION(req) ((session *)fuse_req_userdata(req))

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

static void ll_init(void *userdata, struct fuse_conn_info *conn) {
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

static void init_answered(void *arg) {
  session *s = arg;
  queued *q = s->init_record;
  s->init_record = NULL;
  if (q) enqueue(s, q);
}

/* A lookup in a folder whose names are all known here, of a name it does not hold: no such entry. */
static int answer_negative(fuse_req_t req, fuse_ino_t parent, const char *name) {
  session *s = SESSION(req);
  if (!s->names || !utf8_valid(name)) return 0;
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

/*
 * With `lock` held: the attributes of a file the kernel writes itself (passthrough) into `st`, the
 * spool's size and times with the rest as kept; 0 when `e` is no such file or its spool cannot be read.
 */
static int attr_live(attr_entry *e, struct stat *st) {
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
static int attr_cached(session *s, fuse_ino_t ino, struct stat *st, double *left) {
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

static double timespec_ms(const struct timespec *t) {
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

/* The writer of `fh`, with spool_lock held; NULL if the handle writes through JavaScript. */
static spool_writer *spool_find(session *s, uint64_t fh) {
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
static int spool_hash_alive(const spool_writer *w) {
  return w->sha && !w->hash_broken;
}

/*
 * Writes `size` bytes at `off` into the spool of `fh` (spool_io held shared by the caller), books it
 * for the hash, and queues the record JavaScript does its bookkeeping from. Answers the bytes written or
 * -errno; 1 in *found when `fh` has a writer (else nothing was done). The pwrite runs outside spool_lock,
 * so writes of several reader threads (to one spool or several) go in parallel. `wait`: when the hash
 * has fallen more than SPOOL_HASH_LAG_MAX behind, wait for it before answering (reader threads only).
 */
static ssize_t spool_write(session *s, uint64_t fh, const char *buf, size_t size, off_t off, int wait, int *found) {
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
  while (wait && spool_hash_alive(w) && w->written - w->hashed > SPOOL_HASH_LAG_MAX && !s->hasher_stop)
    pthread_cond_wait(&s->hash_progress, &s->spool_lock);
  pthread_mutex_unlock(&s->spool_lock);
  return err ? -err : (ssize_t)size;
}

/* ---- closes answered here ------------------------------------------------------------------- */

/*
 * A small file created here (answer_create) whose every write the engine answered: its first flush (the
 * close) is answered here too, once the file's journal record, its bytes included, is written to the log
 * JavaScript gave (journalSwitch). The page cache has it then, so a crash of the gateway (kill -9) loses
 * nothing, as when JavaScript answers the close. The record is the upload journal's own put line, under
 * the id the create's record gave JavaScript for the file's version; JavaScript journals that version
 * (same id) when it applies the flush, and its later lines about the id (a rename, the upload's removal)
 * supersede this one at replay, which reads these logs before its own. A file the engine cannot follow
 * exactly (a write not answered here, a truncate, an fsync, a second writer, an unlink of its name, a
 * rename anywhere since its folder's path was told) is closed by JavaScript, as before.
 */
typedef struct created_file {
  struct created_file *next;
  uint64_t fh;
  fuse_ino_t ino, parent;
  char *name;
  char id[17];
  char *library, *fullpath;
  uint64_t paths_epoch;
  char *data;
  size_t size, room;
  int spoiled;
  /* With passthrough: the engine's descriptor of the file's spool (the kernel writes it), or -1. */
  int fd;
  /* With passthrough, once its bytes are read back: the spool's modification time then (ns since the epoch). */
  int64_t spool_mtime_ns;
} created_file;

/* Files followed at once at most, and their bytes (beyond them a new file is closed by JavaScript). */
#define CREATED_MAX 1024
#define CREATED_BYTES_MAX (16u * 1024 * 1024)

static void hex_of(const unsigned char *bytes, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  out[2 * n] = 0;
}

/* All with `lock` held. */
static created_file *created_find(session *s, uint64_t fh) {
  for (created_file *c = s->created; c; c = c->next)
    if (c->fh == fh) return c;
  return NULL;
}

static created_file *created_take(session *s, uint64_t fh) {
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

static void created_free(created_file *c) {
  if (!c) return;
  if (c->fd >= 0) close(c->fd);
  free(c->data);
  free(c->name);
  free(c->library);
  free(c->fullpath);
  free(c);
}

/* Random bytes a thread cuts journal ids from: one call to the random source for 512 ids. */
#define ID_POOL_BYTES 4096
static __thread unsigned char id_pool[ID_POOL_BYTES];
static __thread size_t id_pool_at = ID_POOL_BYTES;

/* A new journal id (16 hex digits) into `id`; 0 when the system gives no random bytes. */
static int new_journal_id(char id[17]) {
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
static const EVP_MD *sha1_md(void) {
  pthread_once(&sha1_once, sha1_fetch);
  return sha1_fetched ? sha1_fetched : EVP_sha1();
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
static void created_write(session *s, created_file *c, const char *buf, size_t size, off_t off) {
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
static void created_spoil(session *s, fuse_ino_t ino) {
  pthread_mutex_lock(&s->lock);
  for (created_file *c = s->created; c; c = c->next)
    if (c->ino == ino) c->spoiled = 1;
  pthread_mutex_unlock(&s->lock);
}

/* An unlink of `name` in `parent`: a file created there under that name is gone (its close is JavaScript's). */
static void created_unlinked(session *s, fuse_ino_t parent, const char *name) {
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
static uint64_t paths_changed(session *s, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname) {
  created_unlinked(s, parent, name);
  created_unlinked(s, newparent, newname);
  pthread_mutex_lock(&s->lock);
  uint64_t epoch = ++s->paths_epoch;
  pthread_mutex_unlock(&s->lock);
  return epoch;
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
 * The upload journal's put line of `c` (see src/vfs/upload-journal.ts): a check of the JSON, a space,
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
static uint64_t journal_append(session *s, created_file *c, char **line, size_t *len) {
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

static int answer_flush(session *s, fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  if (!fi || fi->fh < CREATED_FH_BASE) return 0;
  pthread_mutex_lock(&s->lock);
  created_file *c = created_take(s, fi->fh);
  /* Records waiting for JavaScript stay within ANSWERED_BYTES_MAX: past it, JavaScript closes the file. */
  int ok = c && !c->spoiled && c->paths_epoch == s->paths_epoch && s->answered_bytes < ANSWERED_BYTES_MAX;
  pthread_mutex_unlock(&s->lock);
  /* Written by the kernel (passthrough): its bytes are read back from the spool, when small. */
  if (ok && c->fd >= 0) ok = created_read_spool(c);
  queued *q = ok ? new_queued(s, OP_FLUSH, NULL, ino) : NULL;
  char *line = NULL;
  size_t len = 0;
  uint64_t record = q ? journal_append(s, c, &line, &len) : 0;
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
  q->data = line;
  q->data_len = len;
  q->answered = 1;
  enqueue_quiet(s, q);
  fuse_reply_err(req, 0);
  return 1;
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
    ssize_t n = spool_write(ds, fi->fh, buf, size, off, 1, &found);
    /*
     * A handle without a spool: the engine may answer the write, its record queued under spool_io, so
     * that spoolAttach sees it (it attaches no spool while such a record waits: the engine's own writes
     * into the spool would land before it).
     */
    int answered = !found && answer_write(ds, req, ino, buf, size, off, fi);
    pthread_rwlock_unlock(&ds->spool_io);
    if (found) {
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


/*
 * Answered here (writeback cache only): a create in a folder whose names are all known, of a name it does
 * not hold, is a new empty file. The engine numbers its inode and handle, answers with its attributes
 * (the mode asked for, the mount's owner, the time now), keeps them, and queues the create for
 * JavaScript as a record (quietly: it travels with the next request, the flush at close), which makes
 * the file in the Vfs before anything the kernel sends about it afterwards. Should that fail (a name made
 * elsewhere meanwhile, a folder removed elsewhere), the handle's next flush or fsync answers the error.
 */
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
static int spool_make(session *s, int spool_dir, const char *id) {
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
static void *maker_main(void *arg) {
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
static int spool_take_ready(session *s, char id[17]) {
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
static void ready_return_locked(session *s, int spool_dir, int pool_dir) {
  while (s->maker_busy) pthread_cond_wait(&s->maker_idle, &s->pool_lock);
  s->spool_gen++;
  while (s->ready_count > 0) {
    ready_spool *r = &s->ready[--s->ready_count];
    close(r->fd);
    if (pool_dir < 0 || renameat(spool_dir, r->id, pool_dir, r->id) != 0) unlinkat(spool_dir, r->id, 0);
  }
}

/* Tells a background thread of the session to stop (`stop` set under `lock`, `wake` broadcast) and joins it. */
static void stop_thread(pthread_mutex_t *lock, int *stop, pthread_cond_t *wake, int *started, pthread_t thread) {
  pthread_mutex_lock(lock);
  *stop = 1;
  pthread_cond_broadcast(wake);
  pthread_mutex_unlock(lock);
  if (*started) pthread_join(thread, NULL);
  *started = 0;
}

/* Stops the maker thread (its spools stay made until ready_return_locked). */
static void stop_maker(session *s) {
  stop_thread(&s->pool_lock, &s->maker_stop, &s->maker_work, &s->maker_started, s->maker);
}

static int answer_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
  session *s = SESSION(req);
  /*
   * With passthrough (no writeback cache): a file followed for its close gets its spool here, under its
   * id in the journal's spool folder, and the kernel writes it itself (see "Passthrough"); a file that
   * would not be followed is JavaScript's to create.
   */
  int pass = !s->got_writeback && rings_passthrough(s->rings) && s->spool_dir_fd >= 0 && s->journal_fd >= 0 && !s->backing_denied;
  /* O_DIRECT through a backing file would follow the local disk's alignment rules, which FUSE does not have. */
  if (fi->flags & O_DIRECT) pass = 0;
  if (!s->answer_creates || !(s->got_writeback || pass) || !s->names || !s->attrs || !utf8_valid(name)) return 0;
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
  created_file *c = s->journal_fd >= 0 ? created_new(name) : NULL;
  int followed = 0;
  int backing = 0;
  if (pass) {
    if (c) c->fd = spool_take_ready(s, c->id);
    if (c && c->fd < 0) c->fd = spool_make(s, s->spool_dir_fd, c->id);
    backing = c && c->fd >= 0 ? backing_open(s, c->fd) : 0;
    /* Not allowed to this process (CAP_SYS_ADMIN): never tried again. */
    if (backing == -EPERM) s->backing_denied = 1;
    if (backing <= 0) {
      if (c && c->fd >= 0) unlinkat(s->spool_dir_fd, c->id, 0);
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
    unlinkat(s->spool_dir_fd, c->id, 0);
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

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
  if (answer_create(req, parent, name, mode, fi)) return;
  BEGIN_NAMING(OP_CREATE, parent, 0, 0, parent, name);
  q->name = strdup(name);
  q->mode = mode;
  q->flags = fi->flags;
  enqueue(s, q);
}

/* Links, symbolic links and device nodes: the service stores none (POSIX: EPERM). */
static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev) {
  fuse_reply_err(req, EPERM);
}
static void ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name) {
  fuse_reply_err(req, EPERM);
}
static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname) {
  fuse_reply_err(req, EPERM);
}

static const struct fuse_lowlevel_ops ll_ops = {
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
};

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

static const struct fuse_lowlevel_ops null_ops = {
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

/* ---- reader threads ------------------------------------------------------------------------- */

static void *reader_main(void *arg) {
  session *s = arg;
  pthread_setname_np(pthread_self(), "fuse-reader"); /* as `top -H` shows it */
  struct fuse_buf buf = { .mem = NULL };
  while (!fuse_session_exited(s->se)) {
    int res = fuse_session_receive_buf(s->se, &buf);
    if (res == -EINTR) continue;
    if (res <= 0) break;
    fuse_session_process_buf(s->se, &buf);
  }
  free(buf.mem);
  int last;
  pthread_mutex_lock(&s->lock);
  last = --s->readers_running == 0;
  pthread_mutex_unlock(&s->lock);
  /* Some reader ended: the connection is gone or the session was told to exit. Stop the others too. */
  fuse_session_exit(s->se);
  if (last) {
    /* The connection is gone: so is every ring's (their threads end; answers still to come are dropped). */
    rings_stop(s->rings);
    queued *q = new_queued(s, OP_END, NULL, 0);
    if (q) enqueue(s, q);
  }
  return NULL;
}

/* The session's custom I/O (see rings.c): every read and answer, whichever transport carries it. */
static ssize_t io_read(int fd, void *buf, size_t len, void *userdata) {
  return rings_read(((session *)userdata)->rings, fd, buf, len);
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata) {
  return rings_writev(((session *)userdata)->rings, fd, iov, count);
}

/* ---- N-API helpers --------------------------------------------------------------------------- */

#define NAPI_CALL(env, call)                                          \
  do {                                                                \
    if ((call) != napi_ok) {                                          \
      const napi_extended_error_info *info = NULL;                    \
      napi_get_last_error_info((env), &info);                         \
      napi_throw_error((env), NULL, info && info->error_message ? info->error_message : #call); \
      return NULL;                                                    \
    }                                                                 \
  } while (0)

static void set_num(napi_env env, napi_value obj, const char *key, double v) {
  napi_value n;
  napi_create_double(env, v, &n);
  napi_set_named_property(env, obj, key, n);
}

static void set_str(napi_env env, napi_value obj, const char *key, const char *v) {
  if (!v) return;
  napi_value str;
  napi_create_string_utf8(env, v, NAPI_AUTO_LENGTH, &str);
  napi_set_named_property(env, obj, key, str);
}

/* Finalizer of a write's data Buffer: frees it and tells V8 the memory is gone. */
static void free_data(napi_env env, void *data, void *hint) {
  int64_t ignored;
  free(data);
  napi_adjust_external_memory(env, -(int64_t)(uintptr_t)hint, &ignored);
}

/* Sets `key` of `o` to a Buffer of q's data, which it takes over. */
static void set_data(napi_env env, napi_value o, const char *key, queued *q) {
  napi_value buf;
  if (napi_create_external_buffer(env, q->data_len, q->data, free_data, (void *)(uintptr_t)q->data_len, &buf) == napi_ok) {
    /* The Buffer owns it now; V8 counts it, so garbage collection keeps up with the data rate. */
    int64_t ignored;
    napi_adjust_external_memory(env, (int64_t)q->data_len, &ignored);
    q->data = NULL;
  } else {
    napi_create_buffer_copy(env, q->data_len, q->data, NULL, &buf);
  }
  napi_set_named_property(env, o, key, buf);
}

static napi_value request_object(napi_env env, session *s, queued *q) {
  napi_value o;
  napi_create_object(env, &o);
  set_num(env, o, "op", q->op);
  set_num(env, o, "id", q->id);
  set_num(env, o, "ino", (double)q->ino);
  if (q->has_fh) set_num(env, o, "fh", (double)q->fh);
  if (q->answered) set_num(env, o, "answered", 1);
  switch (q->op) {
    case OP_INIT:
      set_num(env, o, "maxWrite", s->got_max_write);
      set_num(env, o, "maxReadahead", s->got_max_readahead);
      set_num(env, o, "maxBackground", s->got_max_background);
      set_num(env, o, "writeback", s->got_writeback);
      break;
    case OP_FORGET:
      set_num(env, o, "nlookup", (double)q->size);
      break;
    case OP_SETATTR:
      set_num(env, o, "valid", q->valid);
      set_num(env, o, "mode", q->mode);
      set_num(env, o, "uid", q->uid);
      set_num(env, o, "gid", q->gid);
      set_num(env, o, "size", (double)q->size);
      set_num(env, o, "atimeMs", q->atime_ms);
      set_num(env, o, "mtimeMs", q->mtime_ms);
      break;
    case OP_RENAME:
      set_num(env, o, "newparent", (double)q->ino2);
      set_str(env, o, "newname", q->name2);
      set_num(env, o, "flags", q->flags);
      set_num(env, o, "pathsEpoch", (double)q->size);
      break;
    case OP_MKDIR:
    case OP_CREATE:
      set_num(env, o, "mode", q->mode);
      set_num(env, o, "flags", q->flags);
      if (q->answered) {
        set_num(env, o, "newIno", (double)q->ino2);
        set_num(env, o, "mtimeMs", q->mtime_ms);
        set_str(env, o, "journalId", q->name2);
        if (q->backing) set_num(env, o, "backingId", q->backing);
      }
      break;
    case OP_FLUSH:
      if (!q->answered) break;
      /* A close answered here: its journal record's number, the version's id, the line written, and (passthrough) the spool's time when read. */
      set_num(env, o, "record", (double)q->ino2);
      set_str(env, o, "journalId", q->name2);
      set_data(env, o, "line", q);
      if (q->spool_mtime_ns > 0) {
        napi_value ns;
        if (napi_create_bigint_int64(env, q->spool_mtime_ns, &ns) == napi_ok) napi_set_named_property(env, o, "spoolMtimeNs", ns);
      }
      break;
    case OP_OPEN:
    case OP_OPENDIR:
    case OP_FSYNC:
    case OP_FSYNCDIR:
    case OP_ACCESS:
    case OP_RELEASE:
      set_num(env, o, "flags", q->flags);
      break;
    case OP_READ:
    case OP_READDIR:
    case OP_READDIRPLUS:
      set_num(env, o, "size", (double)q->size);
      set_num(env, o, "offset", (double)q->offset);
      break;
    case OP_GETXATTR:
    case OP_LISTXATTR:
      set_num(env, o, "size", (double)q->size);
      break;
    case OP_HASHED:
      set_num(env, o, "seq", (double)q->ino2);
      set_num(env, o, "size", (double)q->size);
      break;
    case OP_WROTE:
      set_num(env, o, "offset", (double)q->offset);
      set_num(env, o, "size", (double)q->size);
      set_num(env, o, "errno", q->flags);
      set_num(env, o, "seq", (double)q->ino2);
      break;
    case OP_WRITE:
      set_num(env, o, "offset", (double)q->offset);
      /* fallthrough */
    case OP_SETXATTR:
      set_num(env, o, "flags", q->flags);
      set_data(env, o, "data", q);
      break;
    default:
      break;
  }
  set_str(env, o, "name", q->name);
  return o;
}

/* The records in `q` as an array of request objects (freeing them). */
static napi_value batch_of(napi_env env, session *s, queued *q);

/* Runs on the main thread: hands everything queued so far to JavaScript in one call. */
static void call_js(napi_env env, napi_value js_cb, void *context, void *data) {
  session *s = context;
  pthread_mutex_lock(&s->lock);
  queued *q = s->head;
  s->head = s->tail = NULL;
  s->scheduled = 0;
  pthread_mutex_unlock(&s->lock);
  if (!env) {
    while (q) {
      queued *next = q->next;
      free_queued(q);
      q = next;
    }
    return;
  }
  napi_value batch = batch_of(env, s, q);
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  napi_call_function(env, undefined, js_cb, 1, &batch, NULL);
}

static napi_value batch_of(napi_env env, session *s, queued *q) {
  napi_value batch;
  napi_create_array(env, &batch);
  uint32_t i = 0;
  size_t answered = 0;
  while (q) {
    queued *next = q->next;
    if (q->answered && (q->op == OP_WRITE || q->op == OP_FLUSH)) answered += q->data_len;
    napi_set_element(env, batch, i++, request_object(env, s, q));
    free_queued(q);
    q = next;
  }
  if (answered) {
    pthread_mutex_lock(&s->lock);
    s->answered_bytes -= answered;
    pthread_mutex_unlock(&s->lock);
  }
  return batch;
}

/*
 * takeQueued(session) → the requests and records queued and not yet handed over (records queued
 * quietly wait for the next request otherwise): at unmount, so that no answered write is left behind.
 */
static session *get_session(napi_env env, napi_value v);

/* The session and the other arguments of a call that takes `want` of them; NULL (thrown) when any is missing. */
static session *session_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv, const char *usage) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < want) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  return get_session(env, argv[0]);
}


static napi_value js_take_queued(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  session *s = session_args(env, info, 1, argv, "takeQueued(session)");
  if (!s) return NULL;
  pthread_mutex_lock(&s->lock);
  queued *q = s->head;
  s->head = s->tail = NULL;
  pthread_mutex_unlock(&s->lock);
  return batch_of(env, s, q);
}

static session *get_session(napi_env env, napi_value v) {
  session *s = NULL;
  if (napi_get_value_external(env, v, (void **)&s) != napi_ok || !s) {
    napi_throw_type_error(env, NULL, "expected a FUSE session");
    return NULL;
  }
  return s;
}

static int get_u32_prop(napi_env env, napi_value obj, const char *key, unsigned *out) {
  napi_value v;
  bool has = false;
  napi_has_named_property(env, obj, key, &has);
  if (!has) return 0;
  napi_get_named_property(env, obj, key, &v);
  uint32_t u;
  if (napi_get_value_uint32(env, v, &u) != napi_ok) return -1;
  *out = u;
  return 1;
}

static char *get_string(napi_env env, napi_value v) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) return NULL;
  char *str = malloc(len + 1);
  if (!str) return NULL;
  napi_get_value_string_utf8(env, v, str, len + 1, &len);
  return str;
}

/* ---- exported functions ---------------------------------------------------------------------- */

/* mount(mountpoint, options: string[], settings, onBatch) → session */
/* A mount that cannot go on: undoes what was made (the rings, the mount, libfuse's session) and throws. */
static napi_value mount_failed(napi_env env, session *s, int mounted, const char *message) {
  rings_free(s->rings);
  if (mounted) fuse_session_unmount(s->se);
  if (s->se) fuse_session_destroy(s->se);
  free(s->null_by_name);
  free(s->names);
  free(s->attrs);
  free(s->mountpoint);
  free(s);
  napi_throw_error(env, NULL, message);
  return NULL;
}

static napi_value js_mount(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 4) {
    napi_throw_type_error(env, NULL, "mount(mountpoint, options, settings, onBatch)");
    return NULL;
  }
  session *s = calloc(1, sizeof(session));
  if (!s) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  pthread_mutex_init(&s->lock, NULL);
  pthread_mutex_init(&s->spool_lock, NULL);
  pthread_mutex_init(&s->journal_lock, NULL);
  s->journal_fd = -1;
  s->spool_dir_fd = -1;
  s->pool_dir_fd = -1;
  pthread_mutex_init(&s->pool_lock, NULL);
  pthread_cond_init(&s->maker_work, NULL);
  pthread_cond_init(&s->maker_idle, NULL);
  pthread_cond_init(&s->hash_work, NULL);
  pthread_cond_init(&s->sync_work, NULL);
  pthread_cond_init(&s->hash_progress, NULL);
  {
    /* Writers first: an attach or detach is not held up by a stream of direct writes. */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->spool_io, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  s->mountpoint = get_string(env, argv[0]);

  unsigned readers = 1, flag = 0;
  get_u32_prop(env, argv[2], "maxWrite", &s->max_write);
  get_u32_prop(env, argv[2], "maxReadahead", &s->max_readahead);
  get_u32_prop(env, argv[2], "maxBackground", &s->max_background);
  get_u32_prop(env, argv[2], "congestionThreshold", &s->congestion_threshold);
  if (get_u32_prop(env, argv[2], "writeback", &flag) > 0) s->writeback = flag != 0;
  if (get_u32_prop(env, argv[2], "asyncRead", &flag) > 0) s->async_read = flag != 0;
  if (get_u32_prop(env, argv[2], "passthrough", &flag) > 0) s->passthrough_want = flag != 0;
  get_u32_prop(env, argv[2], "readers", &readers);
  /* transport: 0 /dev/fuse only, 1 FUSE over io_uring when the kernel offers it; ringDepth: buffers a queue. */
  unsigned transport = 1, ring_depth = 16;
  get_u32_prop(env, argv[2], "transport", &transport);
  get_u32_prop(env, argv[2], "ringDepth", &ring_depth);
  s->rings_want = transport != 0;
  s->ring_depth = (int)ring_depth;
  unsigned writeback_ahead_kib = 0;
  if (get_u32_prop(env, argv[2], "writebackAheadKiB", &writeback_ahead_kib) > 0) s->writeback_ahead = (uint64_t)writeback_ahead_kib * 1024;
  unsigned sync_ahead_kib = 0;
  if (get_u32_prop(env, argv[2], "syncAheadKiB", &sync_ahead_kib) > 0) s->sync_ahead = (uint64_t)sync_ahead_kib * 1024;
  if (get_u32_prop(env, argv[2], "attrCache", &flag) > 0 && flag) {
    s->attrs = calloc(ATTR_BUCKETS, sizeof(attr_entry *));
    if (get_u32_prop(env, argv[2], "answerSmallWrites", &flag) > 0) s->answer_small = flag != 0;
  }
  if (get_u32_prop(env, argv[2], "folderNames", &flag) > 0 && flag) s->names = calloc(NAME_SET_BUCKETS, sizeof(name_set *));
  s->next_ino = CREATED_INO_BASE;
  s->next_fh = CREATED_FH_BASE;
  unsigned timeout_ms = 0;
  if (s->names && s->answer_small && get_u32_prop(env, argv[2], "answerCreates", &flag) > 0 && flag &&
      get_u32_prop(env, argv[2], "uid", &s->create_uid) > 0 && get_u32_prop(env, argv[2], "gid", &s->create_gid) > 0 &&
      get_u32_prop(env, argv[2], "timeoutMs", &timeout_ms) > 0 && timeout_ms > 0) {
    s->answer_creates = 1;
    s->create_timeout = timeout_ms / 1000.0;
  }
  int null_files = get_u32_prop(env, argv[2], "nullFiles", &flag) > 0 && flag;
  if (null_files) {
    s->null_by_name = calloc(NULL_BUCKETS, sizeof(null_node *));
    pthread_mutex_lock(&s->lock);
    null_node *root = s->null_by_name ? null_add(s, 0, "", 1) : NULL;
    pthread_mutex_unlock(&s->lock);
    if (!root) {
      free(s->null_by_name);
      free(s->mountpoint);
      free(s);
      napi_throw_error(env, NULL, "out of memory");
      return NULL;
    }
  }
  if (readers < 1) readers = 1;
  if (readers > 8) readers = 8;

  uint32_t nopt = 0;
  napi_get_array_length(env, argv[1], &nopt);
  char **args = calloc(nopt + 2, sizeof(char *));
  args[0] = strdup("cloudlib");
  for (uint32_t i = 0; i < nopt; i++) {
    napi_value e;
    napi_get_element(env, argv[1], i, &e);
    args[i + 1] = get_string(env, e);
  }
  struct fuse_args fargs = FUSE_ARGS_INIT((int)nopt + 1, args);
  s->se = null_files ? fuse_session_new(&fargs, &null_ops, sizeof(null_ops), s) : fuse_session_new(&fargs, &ll_ops, sizeof(ll_ops), s);
  fuse_opt_free_args(&fargs);
  for (uint32_t i = 0; i <= nopt; i++) free(args[i]);
  free(args);
  if (!s->se) return mount_failed(env, s, 0, "fuse_session_new failed (bad mount options)");
  if (fuse_session_mount(s->se, s->mountpoint) != 0) return mount_failed(env, s, 0, "fuse_session_mount failed (see stderr)");
  /* Reads and answers through rings.c, which takes up FUSE over io_uring at INIT when wanted and offered. */
  int fd = fuse_session_fd(s->se);
  s->rings = rings_new(s->se, fd, s->rings_want, s->ring_depth);
  struct fuse_custom_io io = { .read = io_read, .writev = io_writev };
  if (!s->rings || fuse_session_custom_io(s->se, &io, fd) != 0) return mount_failed(env, s, 1, "cannot set up the session's transport");
  rings_on_init_answered(s->rings, init_answered, s);

  napi_value name;
  napi_create_string_utf8(env, "fuse3-requests", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[3], NULL, name, 0, 1, NULL, NULL, s, call_js, &s->tsfn) != napi_ok) {
    return mount_failed(env, s, 1, "cannot create the request queue");
  }

  s->reader_count = (int)readers;
  s->readers_running = (int)readers;
  for (int i = 0; i < s->reader_count; i++) {
    if (pthread_create(&s->readers[i], NULL, reader_main, s) != 0) {
      s->reader_count = i;
      pthread_mutex_lock(&s->lock);
      s->readers_running = i;
      pthread_mutex_unlock(&s->lock);
      break;
    }
  }
  /* Background syncs follow the writeback the hash thread starts: started first, so the hash thread only
   * ever reads `syncer_started` as it stays until both are stopped. */
  s->syncer_started = s->reader_count > 0 && s->writeback_ahead && s->sync_ahead && pthread_create(&s->syncer, NULL, syncer_main, s) == 0;
  /* Without the hash thread, direct writes keep no hash (the seal hashes the spool). */
  s->hasher_started = s->reader_count > 0 && pthread_create(&s->hasher, NULL, hasher_main, s) == 0;
  if (s->reader_count == 0) {
    napi_release_threadsafe_function(s->tsfn, napi_tsfn_abort);
    return mount_failed(env, s, 1, "cannot start a reader thread");
  }
  napi_value ext;
  NAPI_CALL(env, napi_create_external(env, s, NULL, NULL, &ext));
  return ext;
}

static napi_value bool_value(napi_env env, int b) {
  napi_value v;
  napi_get_boolean(env, b, &v);
  return v;
}

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  session *s;
} unmount_job;

static void unmount_execute(napi_env env, void *data) {
  unmount_job *job = data;
  fuse_session_exit(job->s->se);
  fuse_session_unmount(job->s->se);
}

static void unmount_complete(napi_env env, napi_status status, void *data) {
  unmount_job *job = data;
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  napi_resolve_deferred(env, job->deferred, undefined);
  napi_delete_async_work(env, job->work);
  free(job);
}

/* unmount(session) → Promise: tells the readers to stop and unmounts (lazily), off the main thread. */
static napi_value js_unmount(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  session *s = session_args(env, info, 1, argv, "unmount(session)");
  if (!s) return NULL;
  unmount_job *job = calloc(1, sizeof(unmount_job));
  job->s = s;
  napi_value promise, name;
  NAPI_CALL(env, napi_create_promise(env, &job->deferred, &promise));
  napi_create_string_utf8(env, "fuse3-unmount", NAPI_AUTO_LENGTH, &name);
  NAPI_CALL(env, napi_create_async_work(env, NULL, name, unmount_execute, unmount_complete, job, &job->work));
  NAPI_CALL(env, napi_queue_async_work(env, job->work));
  return promise;
}

/*
 * destroy(session) → true once the readers have ended (OP_END): joins them, answers what is still
 * pending with EIO, frees the libfuse session. With a reader still blocked on the device (the kernel
 * kept the connection) it never blocks the main thread: it answers false and only stops the request
 * queue from keeping the process alive.
 */
static napi_value js_destroy(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  session *s = session_args(env, info, 1, argv, "destroy(session)");
  if (!s) return NULL;
  if (!s->se) return bool_value(env, 1);
  pthread_mutex_lock(&s->lock);
  int running = s->readers_running;
  pthread_mutex_unlock(&s->lock);
  if (running > 0) {
    fuse_session_exit(s->se);
    napi_unref_threadsafe_function(env, s->tsfn);
    return bool_value(env, 0);
  }
  for (int i = 0; i < s->reader_count; i++) pthread_join(s->readers[i], NULL);
  s->reader_count = 0;
  pthread_mutex_lock(&s->lock);
  s->closed = 1;
  for (uint32_t i = 0; i < s->slot_count; i++) {
    if (s->slots[i].used) {
      fuse_reply_err(s->slots[i].req, EIO);
      s->slots[i].used = 0;
    }
  }
  pthread_mutex_unlock(&s->lock);
  for (;;) {
    pthread_mutex_lock(&s->lock);
    int busy = s->notifying;
    pthread_mutex_unlock(&s->lock);
    if (!busy) break;
    usleep(1000);
  }
  /* Before the request queue goes: the hash thread queues records. Hashes not finished are dropped. */
  stop_hasher(s);
  napi_release_threadsafe_function(s->tsfn, napi_tsfn_release);
  /* The rings' threads ended with the readers; answers written from here on go to /dev/fuse (gone). */
  fuse_rings *rings = s->rings;
  s->rings = NULL;
  rings_free(rings);
  fuse_session_destroy(s->se);
  s->se = NULL;
  pthread_mutex_lock(&s->lock);
  for (fuse_ino_t i = 0; i < s->null_count; i++) {
    free(s->null_by_ino[i]->name);
    free(s->null_by_ino[i]);
  }
  free(s->null_by_ino);
  free(s->null_by_name);
  s->null_by_ino = NULL;
  s->null_by_name = NULL;
  s->null_count = s->null_room = 0;
  if (s->attrs) {
    for (uint32_t i = 0; i < ATTR_BUCKETS; i++) {
      while (s->attrs[i]) {
        attr_entry *e = s->attrs[i];
        s->attrs[i] = e->next;
        if (e->has_live_fd) close(e->live_fd);
        free(e);
      }
    }
    free(s->attrs);
    s->attrs = NULL;
    s->attr_count = 0;
  }
  if (s->names) {
    for (uint32_t i = 0; i < NAME_SET_BUCKETS; i++) {
      while (s->names[i]) {
        name_set *n = s->names[i];
        s->names[i] = n->next;
        names_free(s, n);
      }
    }
    free(s->names);
    s->names = NULL;
    s->name_set_count = 0;
  }
  while (s->created) {
    created_file *c = s->created;
    s->created = c->next;
    created_free(c);
  }
  s->created_count = 0;
  s->created_bytes = 0;
  pthread_mutex_unlock(&s->lock);
  stop_maker(s);
  pthread_mutex_lock(&s->pool_lock);
  ready_return_locked(s, s->spool_dir_fd, s->pool_dir_fd);
  pthread_mutex_unlock(&s->pool_lock);
  pthread_mutex_lock(&s->journal_lock);
  if (s->journal_fd >= 0) close(s->journal_fd);
  s->journal_fd = -1;
  if (s->spool_dir_fd >= 0) close(s->spool_dir_fd);
  s->spool_dir_fd = -1;
  pthread_mutex_unlock(&s->journal_lock);
  /* INIT never answered: its record was never queued. */
  if (s->init_record) free_queued(s->init_record);
  s->init_record = NULL;
  pthread_mutex_lock(&s->pool_lock);
  if (s->pool_dir_fd >= 0) close(s->pool_dir_fd);
  s->pool_dir_fd = -1;
  free(s->pool_names);
  s->pool_names = NULL;
  s->pool_count = 0;
  pthread_mutex_unlock(&s->pool_lock);
  /* The session record itself stays: the external may still be referenced from JavaScript. */
  return bool_value(env, 1);
}

static int arg_request_info(napi_env env, napi_callback_info info, size_t want, napi_value *argv, session **s, fuse_req_t *req, slot_info *sinfo) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < want) {
    napi_throw_type_error(env, NULL, "missing arguments");
    return 0;
  }
  *s = get_session(env, argv[0]);
  if (!*s) return 0;
  double id;
  if (napi_get_value_double(env, argv[1], &id) != napi_ok) {
    napi_throw_type_error(env, NULL, "expected a request id");
    return 0;
  }
  *req = slot_take_info(*s, id, sinfo);
  return 1;
}

static int arg_request(napi_env env, napi_callback_info info, size_t want, napi_value *argv, session **s, fuse_req_t *req) {
  return arg_request_info(env, info, want, argv, s, req, NULL);
}

/*
 * The prologue of a reply function taking N arguments: `argv`, the session `s` and the request `req`;
 * returns (thrown) when arguments are missing, and false when the request is no longer pending.
 */
#define REPLY_ARGS(N)                                                 \
  napi_value argv[N];                                                 \
  session *s;                                                         \
  fuse_req_t req;                                                     \
  if (!arg_request(env, info, N, argv, &s, &req)) return NULL;        \
  if (!req) return bool_value(env, 0)

/* Reads a stat record: Float64Array [ino, mode, nlink, uid, gid, size, blocks, blksize, atimeMs, mtimeMs, ctimeMs]. */
/* The 11 stat fields JavaScript sends (ino, mode, nlink, uid, gid, size, blocks, blksize, atime, mtime, ctime in ms). */
static void stat_from_fields(const double *f, struct stat *st) {
  memset(st, 0, sizeof(*st));
  st->st_ino = (ino_t)f[0];
  st->st_mode = (mode_t)f[1];
  st->st_nlink = (nlink_t)f[2];
  st->st_uid = (uid_t)f[3];
  st->st_gid = (gid_t)f[4];
  st->st_size = (off_t)f[5];
  st->st_blocks = (blkcnt_t)f[6];
  st->st_blksize = (blksize_t)f[7];
  double t[3] = { f[8], f[9], f[10] };
  struct timespec *ts[3] = { &st->st_atim, &st->st_mtim, &st->st_ctim };
  for (int i = 0; i < 3; i++) {
    double sec = t[i] / 1000.0;
    ts[i]->tv_sec = (time_t)sec;
    long nsec = (long)((t[i] - (double)ts[i]->tv_sec * 1000.0) * 1e6);
    if (nsec < 0) nsec = 0;
    if (nsec > 999999999) nsec = 999999999;
    ts[i]->tv_nsec = nsec;
  }
}

static int get_stat(napi_env env, napi_value arr, struct stat *st) {
  napi_typedarray_type type;
  size_t length;
  void *data;
  if (napi_get_typedarray_info(env, arr, &type, &length, &data, NULL, NULL) != napi_ok || type != napi_float64_array || length < 11) {
    napi_throw_type_error(env, NULL, "expected a Float64Array of 11 stat fields");
    return 0;
  }
  stat_from_fields(data, st);
  return 1;
}

static double get_double(napi_env env, napi_value v) {
  double d = 0;
  napi_get_value_double(env, v, &d);
  return d;
}

/* replyErr(session, id, errno) → whether the request was still pending. errno 0 = success without data. */
static napi_value js_reply_err(napi_env env, napi_callback_info info) {
  REPLY_ARGS(3);
  fuse_reply_err(req, (int)get_double(env, argv[2]));
  return bool_value(env, 1);
}

/*
 * The arguments of an answer carrying an entry (session, id, stat, entryTimeoutS, attrTimeoutS, and
 * `want` in all): 1 with the entry in `e` (its attributes kept in the engine's cache), 0 when the request
 * is no longer pending (false answered), -1 when thrown or answered EIO (bad stat).
 */
static int entry_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv, fuse_req_t *req, struct fuse_entry_param *e) {
  session *s;
  slot_info sinfo;
  if (!arg_request_info(env, info, want, argv, &s, req, &sinfo)) return -1;
  if (!*req) return 0;
  memset(e, 0, sizeof(*e));
  if (!get_stat(env, argv[2], &e->attr)) {
    fuse_reply_err(*req, EIO);
    return -1;
  }
  e->ino = e->attr.st_ino;
  e->generation = 1;
  e->entry_timeout = get_double(env, argv[3]);
  e->attr_timeout = get_double(env, argv[4]);
  attr_fill(s, &sinfo, &e->attr, e->attr_timeout);
  return 1;
}

#define ENTRY_ARGS(N)                                           \
  napi_value argv[N];                                           \
  fuse_req_t req;                                               \
  struct fuse_entry_param e;                                    \
  int got = entry_args(env, info, N, argv, &req, &e);           \
  if (got < 0) return NULL;                                     \
  if (got == 0) return bool_value(env, 0)

/* replyEntry(session, id, stat, entryTimeoutS, attrTimeoutS) */
static napi_value js_reply_entry(napi_env env, napi_callback_info info) {
  ENTRY_ARGS(5);
  fuse_reply_entry(req, &e);
  return bool_value(env, 1);
}

/* replyNegative(session, id, timeoutS): "no such entry", remembered by the kernel for timeoutS. */
static napi_value js_reply_negative(napi_env env, napi_callback_info info) {
  REPLY_ARGS(3);
  struct fuse_entry_param e;
  memset(&e, 0, sizeof(e));
  e.entry_timeout = get_double(env, argv[2]);
  fuse_reply_entry(req, &e);
  return bool_value(env, 1);
}

/* replyAttr(session, id, stat, attrTimeoutS) */
static napi_value js_reply_attr(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  session *s;
  fuse_req_t req;
  slot_info sinfo;
  if (!arg_request_info(env, info, 4, argv, &s, &req, &sinfo)) return NULL;
  if (!req) return bool_value(env, 0);
  struct stat st;
  if (!get_stat(env, argv[2], &st)) {
    fuse_reply_err(req, EIO);
    return NULL;
  }
  attr_fill(s, &sinfo, &st, get_double(env, argv[3]));
  fuse_reply_attr(req, &st, get_double(env, argv[3]));
  return bool_value(env, 1);
}

/* Open reply flags. */
#define OPEN_DIRECT_IO 1
#define OPEN_KEEP_CACHE 2

static void fill_fi(struct fuse_file_info *fi, double fh, int flags) {
  memset(fi, 0, sizeof(*fi));
  fi->fh = (uint64_t)fh;
  fi->direct_io = (flags & OPEN_DIRECT_IO) != 0;
  fi->keep_cache = (flags & OPEN_KEEP_CACHE) != 0;
}

/* replyOpen(session, id, fh, flags) */
static napi_value js_reply_open(napi_env env, napi_callback_info info) {
  REPLY_ARGS(4);
  struct fuse_file_info fi;
  fill_fi(&fi, get_double(env, argv[2]), (int)get_double(env, argv[3]));
  if (fuse_reply_open(req, &fi) == -ENOENT) return bool_value(env, 0); /* interrupted: the kernel releases nothing */
  return bool_value(env, 1);
}

/*
 * ---- Passthrough ----
 * With passthrough granted at INIT (Linux 6.9 and later, and CAP_SYS_ADMIN for the backing files), an
 * open or create may be answered with a backing file: a local file the kernel then reads and writes
 * itself for that handle, no request reaching the engine. The engine registers the file
 * (FUSE_DEV_IOC_BACKING_OPEN, backingOpen) and JavaScript keeps the id it gets while any handle of the
 * inode is open with it (the kernel takes one backing file an inode); backingClose lets it go. libfuse
 * 3.14 knows none of it: the ioctls and the answers' fields are written here.
 */
#define FOPEN_PASSTHROUGH_FLAG (1u << 7)

typedef struct {
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
} backing_map;

#define DEV_IOC_BACKING_OPEN _IOW(229, 1, backing_map)
#define DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

/* fuse_open_out of protocol 7.40: the backing id where older ones had padding. */
typedef struct {
  uint64_t fh;
  uint32_t open_flags;
  int32_t backing_id;
} open_out;

static uint64_t timeout_sec(double t) {
  if (t <= 0) return 0;
  if (t > 1e18) return (uint64_t)1e18;
  return (uint64_t)t;
}

static uint32_t timeout_nsec(double t) {
  double f = t - (double)timeout_sec(t);
  if (f <= 0) return 0;
  if (f >= 0.999999999) return 999999999;
  return (uint32_t)(f * 1.0e9);
}

/* As libfuse fills an entry's answer (fill_entry, convert_stat). */
static void entry_out_of(const struct fuse_entry_param *e, struct fuse_entry_out *o) {
  memset(o, 0, sizeof(*o));
  o->nodeid = e->ino;
  o->generation = e->generation;
  o->entry_valid = timeout_sec(e->entry_timeout);
  o->entry_valid_nsec = timeout_nsec(e->entry_timeout);
  o->attr_valid = timeout_sec(e->attr_timeout);
  o->attr_valid_nsec = timeout_nsec(e->attr_timeout);
  const struct stat *st = &e->attr;
  o->attr.ino = st->st_ino;
  o->attr.mode = st->st_mode;
  o->attr.nlink = st->st_nlink;
  o->attr.uid = st->st_uid;
  o->attr.gid = st->st_gid;
  o->attr.rdev = st->st_rdev;
  o->attr.size = st->st_size;
  o->attr.blksize = st->st_blksize;
  o->attr.blocks = st->st_blocks;
  o->attr.atime = st->st_atim.tv_sec;
  o->attr.mtime = st->st_mtim.tv_sec;
  o->attr.ctime = st->st_ctim.tv_sec;
  o->attr.atimensec = st->st_atim.tv_nsec;
  o->attr.mtimensec = st->st_mtim.tv_nsec;
  o->attr.ctimensec = st->st_ctim.tv_nsec;
}

/* Registers `fd` as a backing file: its id (> 0), or -errno. */
static int backing_open(session *s, int fd) {
  if (!rings_passthrough(s->rings)) return -EOPNOTSUPP;
  backing_map map;
  memset(&map, 0, sizeof(map));
  map.fd = fd;
  int res = ioctl(fuse_session_fd(s->se), DEV_IOC_BACKING_OPEN, &map);
  if (res < 0) return -errno;
  return res == 0 ? -EIO : res; /* ids start at 1 */
}

/* Lets the backing file `id` go (handles opened with it keep it): 0, or -errno. */
static int backing_close(session *s, int id) {
  uint32_t v = (uint32_t)id;
  return ioctl(fuse_session_fd(s->se), DEV_IOC_BACKING_CLOSE, &v) < 0 ? -errno : 0;
}

/* Answers a create with the backing file `backing` (fuse_reply_create's answer, with the open's passthrough fields). */
static int reply_create_backing(fuse_req_t req, const struct fuse_entry_param *e, uint64_t fh, int backing) {
  struct {
    struct fuse_entry_out entry;
    open_out open;
  } o;
  _Static_assert(sizeof(o) == sizeof(struct fuse_entry_out) + sizeof(open_out), "the create answer is the entry then the open, unpadded");
  entry_out_of(e, &o.entry);
  memset(&o.open, 0, sizeof(o.open));
  o.open.fh = fh;
  o.open.open_flags = FOPEN_PASSTHROUGH_FLAG;
  o.open.backing_id = backing;
  return fuse_reply_buf(req, (const char *)&o, sizeof(o));
}

/* backingOpen(session, fd) → the backing id (> 0), or -errno when the kernel refused the file. */
static napi_value js_backing_open(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  session *s = session_args(env, info, 2, argv, "backingOpen(session, fd)");
  if (!s) return NULL;
  napi_value out;
  napi_create_int32(env, backing_open(s, (int)get_double(env, argv[1])), &out);
  return out;
}

/* backingClose(session, id) → 0, or -errno. */
static napi_value js_backing_close(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  session *s = session_args(env, info, 2, argv, "backingClose(session, id)");
  if (!s) return NULL;
  napi_value out;
  napi_create_int32(env, backing_close(s, (int)get_double(env, argv[1])), &out);
  return out;
}

/* replyOpenBacking(session, id, fh, backingId): the open answered with a backing file. */
static napi_value js_reply_open_backing(napi_env env, napi_callback_info info) {
  REPLY_ARGS(4);
  open_out o;
  memset(&o, 0, sizeof(o));
  o.fh = (uint64_t)get_double(env, argv[2]);
  o.open_flags = FOPEN_PASSTHROUGH_FLAG;
  o.backing_id = (int32_t)get_double(env, argv[3]);
  if (fuse_reply_buf(req, (const char *)&o, sizeof(o)) == -ENOENT) return bool_value(env, 0);
  return bool_value(env, 1);
}

/* replyCreate(session, id, stat, entryTimeoutS, attrTimeoutS, fh, flags) */
static napi_value js_reply_create(napi_env env, napi_callback_info info) {
  ENTRY_ARGS(7);
  struct fuse_file_info fi;
  fill_fi(&fi, get_double(env, argv[5]), (int)get_double(env, argv[6]));
  if (fuse_reply_create(req, &e, &fi) == -ENOENT) return bool_value(env, 0);
  return bool_value(env, 1);
}

/* replyCreateBacking(session, id, stat, entryTimeoutS, attrTimeoutS, fh, backingId): the create answered with a backing file. */
static napi_value js_reply_create_backing(napi_env env, napi_callback_info info) {
  ENTRY_ARGS(7);
  if (reply_create_backing(req, &e, (uint64_t)get_double(env, argv[5]), (int)get_double(env, argv[6])) == -ENOENT) return bool_value(env, 0);
  return bool_value(env, 1);
}

/* replyWrite(session, id, count) */
static napi_value js_reply_write(napi_env env, napi_callback_info info) {
  REPLY_ARGS(3);
  fuse_reply_write(req, (size_t)get_double(env, argv[2]));
  return bool_value(env, 1);
}

/* replyXattrSize(session, id, size) */
static napi_value js_reply_xattr(napi_env env, napi_callback_info info) {
  REPLY_ARGS(3);
  fuse_reply_xattr(req, (size_t)get_double(env, argv[2]));
  return bool_value(env, 1);
}

/* replyData(session, id, buffers: Buffer[], limit): the buffers in order, at most `limit` bytes in all. */
static napi_value js_reply_data(napi_env env, napi_callback_info info) {
  REPLY_ARGS(4);
  uint32_t n = 0;
  napi_get_array_length(env, argv[2], &n);
  size_t limit = (size_t)get_double(env, argv[3]);
  struct iovec small[16];
  struct iovec *iov = n <= 16 ? small : malloc(n * sizeof(struct iovec));
  if (!iov) {
    fuse_reply_err(req, ENOMEM);
    return bool_value(env, 1);
  }
  int count = 0;
  size_t total = 0;
  for (uint32_t i = 0; i < n && total < limit; i++) {
    napi_value b;
    napi_get_element(env, argv[2], i, &b);
    void *p;
    size_t len;
    if (napi_get_buffer_info(env, b, &p, &len) != napi_ok) continue;
    if (len > limit - total) len = limit - total;
    if (len == 0) continue;
    iov[count].iov_base = p;
    iov[count].iov_len = len;
    count++;
    total += len;
  }
  if (count == 0) fuse_reply_buf(req, NULL, 0);
  else fuse_reply_iov(req, iov, count);
  if (iov != small) free(iov);
  return bool_value(env, 1);
}

/*
 * replyFd(session, id, fd, position, length): answers a read with `length` bytes at `position` of `fd`,
 * read by libfuse into a buffer of its own and written to the kernel (the bytes never enter JavaScript).
 * A failed read answers its errno. → whether the request was still pending.
 */
static napi_value js_reply_fd(napi_env env, napi_callback_info info) {
  REPLY_ARGS(5);
  double fd = get_double(env, argv[2]), pos = get_double(env, argv[3]), len = get_double(env, argv[4]);
  if (!(fd >= 0 && fd <= 0x7fffffff && pos >= 0 && len >= 0 && len <= 0x7fffffff)) {
    fuse_reply_err(req, EINVAL);
    return bool_value(env, 1);
  }
  struct fuse_bufvec bufv = FUSE_BUFVEC_INIT((size_t)len);
  bufv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
  bufv.buf[0].fd = (int)fd;
  bufv.buf[0].pos = (off_t)pos;
  fuse_reply_data(req, &bufv, FUSE_BUF_NO_SPLICE);
  return bool_value(env, 1);
}

/* Writes entry i, named `name`, of a listing answer into `buf` (at most `room` bytes); answers the size it needs. */
typedef size_t (*entry_writer)(fuse_req_t req, char *buf, size_t room, const char *name, uint32_t i, off_t off, const void *ctx);

/*
 * Answers a readdir or readdirplus with the entries of `names` (at most `most`) that fit in `size` bytes,
 * the offset of entry i being first + i + 1; answers how many went in.
 */
static int32_t reply_entries(napi_env env, fuse_req_t req, size_t size, napi_value names, uint32_t most, double first, entry_writer write, const void *ctx) {
  uint32_t n = 0;
  napi_get_array_length(env, names, &n);
  if (n > most) n = most;
  char *buf = malloc(size ? size : 1);
  if (!buf) {
    fuse_reply_err(req, ENOMEM);
    return -1;
  }
  size_t used = 0;
  int32_t added = 0;
  char name[1024];
  for (uint32_t i = 0; i < n; i++) {
    napi_value e;
    napi_get_element(env, names, i, &e);
    size_t len = 0;
    if (napi_get_value_string_utf8(env, e, name, sizeof(name), &len) != napi_ok) break;
    size_t need = write(req, buf + used, size - used, name, i, (off_t)(first + i + 1), ctx);
    if (need > size - used) break;
    used += need;
    added++;
  }
  fuse_reply_buf(req, buf, used);
  free(buf);
  return added;
}

typedef struct { const double *inos; const uint8_t *dirs; } dir_entries;

static size_t write_dir_entry(fuse_req_t req, char *buf, size_t room, const char *name, uint32_t i, off_t off, const void *ctx) {
  const dir_entries *d = ctx;
  struct stat st;
  memset(&st, 0, sizeof(st));
  st.st_ino = (ino_t)d->inos[i];
  st.st_mode = d->dirs[i] ? S_IFDIR : S_IFREG;
  return fuse_add_direntry(req, buf, room, name, &st, off);
}

typedef struct { const double *stats; double entry_timeout; double attr_timeout; } dir_plus_entries;

static size_t write_dir_plus_entry(fuse_req_t req, char *buf, size_t room, const char *name, uint32_t i, off_t off, const void *ctx) {
  const dir_plus_entries *d = ctx;
  struct fuse_entry_param ep;
  memset(&ep, 0, sizeof(ep));
  stat_from_fields(d->stats + (size_t)i * 11, &ep.attr);
  ep.ino = ep.attr.st_ino;
  ep.generation = 1;
  ep.entry_timeout = d->entry_timeout;
  ep.attr_timeout = d->attr_timeout;
  return fuse_add_direntry_plus(req, buf, room, name, &ep, off);
}

/*
 * replyDir(session, id, size, names: string[], inos: Float64Array, dirs: Uint8Array, firstOffset) → entries
 * added: directory entries from `firstOffset` on (the offset of entry i is firstOffset + i + 1), as many
 * as fit in `size` bytes.
 */
static napi_value js_reply_dir(napi_env env, napi_callback_info info) {
  napi_value argv[7];
  session *s;
  fuse_req_t req;
  if (!arg_request(env, info, 7, argv, &s, &req)) return NULL;
  napi_value result;
  int32_t added = -1;
  if (req) {
    napi_typedarray_type type;
    size_t ilen = 0, dlen = 0;
    void *idata = NULL, *ddata = NULL;
    napi_get_typedarray_info(env, argv[4], &type, &ilen, &idata, NULL, NULL);
    napi_get_typedarray_info(env, argv[5], &type, &dlen, &ddata, NULL, NULL);
    dir_entries d = { idata, ddata };
    added = reply_entries(env, req, (size_t)get_double(env, argv[2]), argv[3], (uint32_t)(ilen < dlen ? ilen : dlen), get_double(env, argv[6]), write_dir_entry, &d);
  }
  napi_create_int32(env, added, &result);
  return result;
}

/*
 * replyDirPlus(session, id, size, names: string[], stats: Float64Array (11 fields an entry, as replyAttr
 * takes), entryTimeoutS, attrTimeoutS, firstOffset) → entries added: as replyDir, each entry with its
 * attributes, so that `ls -l` needs no lookup a name. The kernel counts one lookup for every entry added
 * other than "." and ".."; the caller takes back those it counted for entries that did not fit.
 */
static napi_value js_reply_dir_plus(napi_env env, napi_callback_info info) {
  napi_value argv[8];
  session *s;
  fuse_req_t req;
  if (!arg_request(env, info, 8, argv, &s, &req)) return NULL;
  napi_value result;
  int32_t added = -1;
  if (req) {
    napi_typedarray_type type;
    size_t slen = 0;
    void *sdata = NULL;
    if (napi_get_typedarray_info(env, argv[4], &type, &slen, &sdata, NULL, NULL) != napi_ok || type != napi_float64_array) {
      fuse_reply_err(req, EIO);
      napi_throw_type_error(env, NULL, "expected a Float64Array of 11 stat fields an entry");
      return NULL;
    }
    dir_plus_entries d = { sdata, get_double(env, argv[5]), get_double(env, argv[6]) };
    added = reply_entries(env, req, (size_t)get_double(env, argv[2]), argv[3], (uint32_t)(slen / 11), get_double(env, argv[7]), write_dir_plus_entry, &d);
  }
  napi_create_int32(env, added, &result);
  return result;
}

/* replyStatfs(session, id, Float64Array [bsize, frsize, blocks, bfree, bavail, files, ffree, favail, fsid, flag, namemax]) */
static napi_value js_reply_statfs(napi_env env, napi_callback_info info) {
  REPLY_ARGS(3);
  napi_typedarray_type type;
  size_t length = 0;
  void *data = NULL;
  if (napi_get_typedarray_info(env, argv[2], &type, &length, &data, NULL, NULL) != napi_ok || type != napi_float64_array || length < 11) {
    fuse_reply_err(req, EIO);
    napi_throw_type_error(env, NULL, "expected a Float64Array of 11 statvfs fields");
    return NULL;
  }
  double *f = data;
  struct statvfs st;
  memset(&st, 0, sizeof(st));
  st.f_bsize = (unsigned long)f[0];
  st.f_frsize = (unsigned long)f[1];
  st.f_blocks = (fsblkcnt_t)f[2];
  st.f_bfree = (fsblkcnt_t)f[3];
  st.f_bavail = (fsblkcnt_t)f[4];
  st.f_files = (fsfilcnt_t)f[5];
  st.f_ffree = (fsfilcnt_t)f[6];
  st.f_favail = (fsfilcnt_t)f[7];
  st.f_fsid = (unsigned long)f[8];
  st.f_flag = (unsigned long)f[9];
  st.f_namemax = (unsigned long)f[10];
  fuse_reply_statfs(req, &st);
  return bool_value(env, 1);
}

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  session *s;
  fuse_ino_t parent;
  char *name;
  int rc;
} notify_job;

static void notify_execute(napi_env env, void *data) {
  notify_job *job = data;
  session *s = job->s;
  pthread_mutex_lock(&s->lock);
  int closed = s->closed;
  if (!closed) s->notifying++;
  pthread_mutex_unlock(&s->lock);
  if (closed) {
    job->rc = -ENOTCONN;
    return;
  }
  job->rc = fuse_lowlevel_notify_inval_entry(s->se, job->parent, job->name, strlen(job->name));
  pthread_mutex_lock(&s->lock);
  s->notifying--;
  pthread_mutex_unlock(&s->lock);
}

static void notify_complete(napi_env env, napi_status status, void *data) {
  notify_job *job = data;
  napi_value rc;
  napi_create_int32(env, job->rc, &rc);
  napi_resolve_deferred(env, job->deferred, rc);
  napi_delete_async_work(env, job->work);
  free(job->name);
  free(job);
}

/*
 * invalidateEntry(session, parentIno, name) → Promise<rc>: the kernel forgets a name it cached (its
 * file changed elsewhere), so the next path walk looks it up again. Runs off the main thread: the
 * kernel may have to wait for a request on that folder that only the main thread answers.
 */
static napi_value js_invalidate_entry(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  notify_job *job = calloc(1, sizeof(notify_job));
  if (!job) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  job->s = s;
  job->parent = (fuse_ino_t)get_double(env, argv[1]);
  job->name = get_string(env, argv[2]);
  napi_value promise, name;
  NAPI_CALL(env, napi_create_promise(env, &job->deferred, &promise));
  napi_create_string_utf8(env, "fuse3-notify", NAPI_AUTO_LENGTH, &name);
  NAPI_CALL(env, napi_create_async_work(env, NULL, name, notify_execute, notify_complete, job, &job->work));
  NAPI_CALL(env, napi_queue_async_work(env, job->work));
  return promise;
}

/* ---- direct spool writes ---------------------------------------------------------------------- */

static void spool_free(spool_writer *w) {
  if (w->sha) EVP_MD_CTX_free(w->sha);
  if (w->fd >= 0) close(w->fd);
  free(w);
}

/* Removes the writer of `fh` from the list (spool_lock held) and returns it; NULL if there is none. */
static spool_writer *spool_unlink(session *s, uint64_t fh) {
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
static void spool_retire(session *s, spool_writer *w) {
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
static int spool_digest(spool_writer *w, char *hex) {
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
static void *hasher_main(void *arg) {
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
static void *syncer_main(void *arg) {
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
static void stop_hasher(session *s) {
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

/*
 * spoolAttach(session, fh, fd, hashFrom) → seq: from now on the writes of `fh` go into the file `fd`
 * (which stays JavaScript's: the engine writes through a duplicate of it, and JavaScript must call
 * spoolDetach before closing it). hashFrom >= 0: the spool's first hashFrom bytes are all there is and
 * were written front to back; the hash thread reads them back and hashes them, and goes on with each
 * write that continues them. -1: no hash kept. Records of this attachment's writes carry a `seq` above
 * the number answered. Undefined, and nothing attached, while a write of `fh` the engine answered is
 * still queued for JavaScript: the kernel may already have sent a later write over the same bytes, which
 * would reach the spool first. (JavaScript, for its part, attaches none while it has not made every
 * such write it took.)
 */
static napi_value js_spool_attach(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  session *s = session_args(env, info, 4, argv, "spoolAttach(session, fh, fd, hashFrom)");
  if (!s) return NULL;
  double fh = get_double(env, argv[1]), fd = get_double(env, argv[2]), from = get_double(env, argv[3]);
  if (!(fh >= 0) || !(fd >= 0) || fd > 0x7fffffff) {
    napi_throw_range_error(env, NULL, "spoolAttach: expected a handle number and a descriptor >= 0");
    return NULL;
  }
  spool_writer *w = calloc(1, sizeof(spool_writer));
  if (!w) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  w->fh = (uint64_t)fh;
  w->fd = fcntl((int)fd, F_DUPFD_CLOEXEC, 0);
  if (w->fd < 0) {
    int e = errno;
    free(w);
    napi_throw_error(env, NULL, e == EBADF ? "spoolAttach: not an open descriptor" : "spoolAttach: cannot duplicate the descriptor");
    return NULL;
  }
  if (from >= 0 && s->hasher_started) {
    w->sha = EVP_MD_CTX_new();
    if (w->sha && EVP_DigestInit_ex(w->sha, sha1_md(), NULL) != 1) {
      EVP_MD_CTX_free(w->sha);
      w->sha = NULL;
    }
    w->written = (uint64_t)from;
  }
  w->end = w->written;
  pthread_rwlock_wrlock(&s->spool_io);
  /* Writes answered after this see the spool (ll_write answers under spool_io): only those before count. */
  int waiting = 0;
  pthread_mutex_lock(&s->lock);
  for (queued *q = s->head; q && !waiting; q = q->next)
    waiting = q->answered && q->op == OP_WRITE && q->has_fh && q->fh == w->fh;
  pthread_mutex_unlock(&s->lock);
  if (waiting) {
    pthread_rwlock_unlock(&s->spool_io);
    spool_free(w);
    napi_value none;
    napi_get_undefined(env, &none);
    return none;
  }
  pthread_mutex_lock(&s->spool_lock);
  spool_writer *old = spool_unlink(s, w->fh);
  if (old) spool_retire(s, old);
  w->next = s->spools;
  s->spools = w;
  if (w->written > 0) pthread_cond_signal(&s->hash_work);
  double base = (double)s->spool_seq;
  pthread_mutex_unlock(&s->spool_lock);
  pthread_rwlock_unlock(&s->spool_io);
  napi_value result;
  napi_create_double(env, base, &result);
  return result;
}

/*
 * spoolDetach(session, fh) → undefined when `fh` had no spool, else { count, end, errno, hashed, sha1?,
 * hashing? }: the writes of `fh` go through JavaScript again (writes under way finish first). `hashed`:
 * how many of the spool's first bytes the hash covers when every write continued it; `sha1` (hex) is
 * that hash when the hash thread had already caught up, else `hashing` numbers the HASHED record that
 * will carry it (never held up here: the main thread does not wait for the hash).
 */
static napi_value js_spool_detach(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  session *s = session_args(env, info, 2, argv, "spoolDetach(session, fh)");
  if (!s) return NULL;
  uint64_t fh = (uint64_t)get_double(env, argv[1]);
  napi_value result;
  char hex[41];
  int have_hex = 0;
  double token = 0;
  pthread_rwlock_wrlock(&s->spool_io);
  pthread_mutex_lock(&s->spool_lock);
  spool_writer *w = spool_unlink(s, fh);
  if (!w) {
    pthread_mutex_unlock(&s->spool_lock);
    pthread_rwlock_unlock(&s->spool_io);
    napi_get_undefined(env, &result);
    return result;
  }
  double count = (double)w->count, end = (double)w->end, hashed = 0;
  int err = w->err;
  /* A hash is of use only when it covers everything written. */
  if (spool_hash_alive(w) && !w->err && w->nahead == 0 && w->written == w->end) {
    hashed = (double)w->written;
    if (!w->hashing && w->hashed == w->written) have_hex = spool_digest(w, hex);
    else token = (double)(w->token = ++s->hash_token);
  }
  spool_retire(s, w);
  pthread_mutex_unlock(&s->spool_lock);
  pthread_rwlock_unlock(&s->spool_io);
  napi_create_object(env, &result);
  set_num(env, result, "count", count);
  set_num(env, result, "end", end);
  set_num(env, result, "errno", err);
  set_num(env, result, "hashed", hashed);
  if (have_hex) set_str(env, result, "sha1", hex);
  if (token > 0) set_num(env, result, "hashing", token);
  return result;
}

/*
 * spoolWrite(session, fh, data, offset) → bytes written or -errno; undefined when `fh` has no spool. For
 * a write JavaScript received before the handle got its spool: it goes the same way as the engine's own
 * (record queued, hash kept), so the order of the writes is the order they reached the spool.
 */
static napi_value js_spool_write(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  session *s = session_args(env, info, 4, argv, "spoolWrite(session, fh, data, offset)");
  if (!s) return NULL;
  void *data;
  size_t len;
  if (napi_get_buffer_info(env, argv[2], &data, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "spoolWrite: expected a Buffer");
    return NULL;
  }
  double off = get_double(env, argv[3]);
  if (!(off >= 0)) {
    napi_throw_range_error(env, NULL, "spoolWrite: expected an offset >= 0");
    return NULL;
  }
  napi_value result;
  int found = 0;
  pthread_rwlock_rdlock(&s->spool_io);
  /* The main thread never waits for the hash thread. */
  ssize_t n = spool_write(s, (uint64_t)get_double(env, argv[1]), data, len, (off_t)off, 0, &found);
  pthread_rwlock_unlock(&s->spool_io);
  if (!found) napi_get_undefined(env, &result);
  else napi_create_double(env, (double)n, &result);
  return result;
}

/* A call (session, ino) that drops what the engine keeps of `ino` with `forget`. */
static napi_value forget_call(napi_env env, napi_callback_info info, const char *usage, void (*forget)(session *, fuse_ino_t)) {
  napi_value argv[2];
  session *s = session_args(env, info, 2, argv, usage);
  if (!s) return NULL;
  forget(s, (fuse_ino_t)get_double(env, argv[1]));
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  return undefined;
}

/* attrForget(session, ino): the attributes of `ino` changed in a way the engine cannot see (a rename, another client). */
static napi_value js_attr_forget(napi_env env, napi_callback_info info) {
  return forget_call(env, info, "attrForget(session, ino)", attr_forget);
}

/*
 * attrLive(session, ino, on) → whether the engine keeps no attributes of `ino` from now on (on), or may
 * again (off): while the kernel writes the file itself (passthrough), its size and times change with no
 * request, so none is answered from the cache; it counts as a change under way until then. False when
 * the cache could not take the mark (full): the caller then does not hand the file over.
 */
static napi_value js_attr_live(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  size_t argc = 4;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3) {
    napi_throw_type_error(env, NULL, "attrLive(session, ino, on, fd?)");
    return NULL;
  }
  session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  fuse_ino_t ino = (fuse_ino_t)get_double(env, argv[1]);
  bool on = false;
  napi_get_value_bool(env, argv[2], &on);
  napi_valuetype t = napi_undefined;
  if (argc > 3) napi_typeof(env, argv[3], &t);
  int fd = on && t == napi_number ? dup((int)get_double(env, argv[3])) : -1;
  int ok = 1, old_fd = -1;
  pthread_mutex_lock(&s->lock);
  attr_entry *e = attr_find(s, ino, on);
  if (on && e) {
    e->valid = 0;
    e->changed = ++s->epoch;
    e->inflight++;
    /* getattr answered from the spool, with the attributes last answered (when there are some). */
    if (fd >= 0 && e->st.st_ino == ino && !e->has_live_fd) {
      e->live_fd = fd;
      e->has_live_fd = 1;
      e->live_stale = 0;
      fd = -1;
    }
  } else if (on) {
    ok = s->attrs == NULL;
  } else {
    attr_changed(s, ino);
    if (e && e->has_live_fd) {
      old_fd = e->live_fd;
      e->has_live_fd = 0;
    }
  }
  pthread_mutex_unlock(&s->lock);
  if (fd >= 0) close(fd);
  if (old_fd >= 0) close(old_fd);
  return bool_value(env, ok);
}

/*
 * folderNames(session, id, ino, names, timeoutS, where?) → whether the engine keeps them: every name of
 * folder `ino` as the answer to request `id` (still pending) found them, for timeoutS seconds. Refused
 * when a request that may add a name arrived after `id` or is unanswered (apart from `id` itself).
 * `where` ({ library, fullpath }): where the folder is in the Vfs, for the journal records of closes
 * answered here; without it, the closes of files created in the folder are JavaScript's.
 */
static napi_value js_folder_names(napi_env env, napi_callback_info info) {
  napi_value argv[6];
  size_t argc = 6;
  napi_get_undefined(env, &argv[5]);
  session *s = session_args(env, info, 5, argv, "folderNames(session, id, ino, names, timeoutS, where?)");
  if (!s) return NULL;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  char *library = NULL, *fullpath = NULL;
  napi_valuetype where_type = napi_undefined;
  napi_typeof(env, argv[5], &where_type);
  if (where_type == napi_object) {
    napi_value lib, path;
    napi_valuetype lt = napi_undefined, pt = napi_undefined;
    if (napi_get_named_property(env, argv[5], "library", &lib) == napi_ok) napi_typeof(env, lib, &lt);
    if (napi_get_named_property(env, argv[5], "fullpath", &path) == napi_ok) napi_typeof(env, path, &pt);
    if (lt != napi_string || pt != napi_string) {
      napi_throw_type_error(env, NULL, "where: expected { library: string, fullpath: string }");
      return NULL;
    }
    library = get_string(env, lib);
    fullpath = get_string(env, path);
  } else if (where_type != napi_undefined) {
    napi_throw_type_error(env, NULL, "where: expected { library: string, fullpath: string } or undefined");
    return NULL;
  }
  double id = get_double(env, argv[1]);
  fuse_ino_t ino = (fuse_ino_t)get_double(env, argv[2]);
  double timeout = get_double(env, argv[4]);
  uint32_t count = 0;
  bool is_array = false;
  napi_is_array(env, argv[3], &is_array);
  if (!is_array || napi_get_array_length(env, argv[3], &count) != napi_ok) {
    napi_throw_type_error(env, NULL, "expected an array of names");
    return NULL;
  }
  if (!s->names || ino == 0 || !(timeout > 0) || count >= NAMES_HELD_MAX) {
    free(library);
    free(fullpath);
    return bool_value(env, 0);
  }
  name_set *n = calloc(1, sizeof(name_set));
  uint32_t room = 16;
  while (room < count * 2 + 2) room *= 2;
  if (n) n->slots = calloc(room, sizeof(char *));
  if (!n || !n->slots) {
    free(n);
    free(library);
    free(fullpath);
    return bool_value(env, 0);
  }
  n->ino = ino;
  n->room = room;
  if (library && fullpath) {
    n->library = library;
    n->fullpath = fullpath;
  } else {
    free(library);
    free(fullpath);
  }
  /* Names are put in with the lock held (names_put counts them), after being read from JavaScript. */
  char **read = calloc(count ? count : 1, sizeof(char *));
  int ok = read != NULL;
  for (uint32_t i = 0; ok && i < count; i++) {
    napi_value v;
    if (napi_get_element(env, argv[3], i, &v) != napi_ok || !(read[i] = get_string(env, v))) ok = 0;
  }
  pthread_mutex_lock(&s->lock);
  slot *sl = ok ? slot_peek(s, id) : NULL;
  int keep = sl && s->names_epoch <= sl->epoch && s->names_inflight == (sl->adds_name ? 1 : 0) &&
             (names_find(s, ino) || s->name_set_count < NAME_SETS_MAX);
  for (uint32_t i = 0; keep && i < count; i++) keep = names_put(s, n, read[i]);
  if (keep) {
    names_drop(s, ino);
    n->expires = now_s() + timeout;
    n->paths_epoch = s->paths_epoch;
    n->next = s->names[ino % NAME_SET_BUCKETS];
    s->names[ino % NAME_SET_BUCKETS] = n;
    s->name_set_count++;
  } else {
    names_free(s, n);
  }
  pthread_mutex_unlock(&s->lock);
  if (read)
    for (uint32_t i = 0; i < count; i++) free(read[i]);
  free(read);
  if (!ok) {
    napi_throw_type_error(env, NULL, "expected an array of names (strings)");
    return NULL;
  }
  return bool_value(env, keep);
}

static void names_forget(session *s, fuse_ino_t ino) {
  pthread_mutex_lock(&s->lock);
  names_drop(s, ino);
  pthread_mutex_unlock(&s->lock);
}

/*
 * pathsKept(session, epoch) → boolean: the rename whose record carried `epoch` was of a file, so no
 * folder's path changed: when no rename came since, the folder paths told before it, and the files
 * created in folders whose paths were told, are valid again (those created under the rename's two names
 * stay JavaScript's). False when another rename came meanwhile (its own answer decides).
 */
static napi_value js_paths_kept(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  session *s = session_args(env, info, 2, argv, "pathsKept(session, epoch)");
  if (!s) return NULL;
  double epoch = get_double(env, argv[1]);
  if (!(epoch >= 1)) {
    napi_throw_range_error(env, NULL, "pathsKept: expected the epoch of a rename record");
    return NULL;
  }
  int kept = 0;
  pthread_mutex_lock(&s->lock);
  uint64_t now = (uint64_t)epoch;
  if (s->paths_epoch == now) {
    kept = 1;
    if (s->names)
      for (uint32_t b = 0; b < NAME_SET_BUCKETS; b++)
        for (name_set *n = s->names[b]; n; n = n->next)
          if (n->paths_epoch == now - 1) n->paths_epoch = now;
    for (created_file *c = s->created; c; c = c->next)
      if (c->paths_epoch == now - 1) c->paths_epoch = now;
  }
  pthread_mutex_unlock(&s->lock);
  return bool_value(env, kept);
}

/* namesForget(session, ino): the names of folder `ino` changed in a way the engine cannot see. */
static napi_value js_names_forget(napi_env env, napi_callback_info info) {
  return forget_call(env, info, "namesForget(session, ino)", names_forget);
}

/* answeredCounts(session) → { getattr, writes, times, modes, lookups, creates, closes, spoolsMadeAhead }: requests the engine answered itself. */
static napi_value js_answered_counts(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  session *s = session_args(env, info, 1, argv, "answeredCounts(session)");
  if (!s) return NULL;
  pthread_mutex_lock(&s->lock);
  double g = (double)s->getattr_answered, w = (double)s->writes_answered, t = (double)s->times_answered, m = (double)s->modes_answered;
  double l = (double)s->lookups_answered, c = (double)s->creates_answered, k = (double)s->closes_answered;
  pthread_mutex_unlock(&s->lock);
  pthread_mutex_lock(&s->pool_lock);
  double ahead = (double)s->ready_taken;
  pthread_mutex_unlock(&s->pool_lock);
  napi_value result;
  napi_create_object(env, &result);
  set_num(env, result, "getattr", g);
  set_num(env, result, "writes", w);
  set_num(env, result, "times", t);
  set_num(env, result, "modes", m);
  set_num(env, result, "lookups", l);
  set_num(env, result, "creates", c);
  set_num(env, result, "closes", k);
  set_num(env, result, "spoolsMadeAhead", ahead);
  return result;
}

/*
 * transport(session) → { transport: "uring" | "dev", why?, ringRequests, devRequests, queues, depth }:
 * how the kernel's requests reach the session (rings.c), and why not over io_uring when they do not.
 */
static napi_value js_transport(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  session *s = session_args(env, info, 1, argv, "transport(session)");
  if (!s) return NULL;
  rings_counts c;
  rings_counts_of(s->rings, &c);
  napi_value result, flagv;
  napi_create_object(env, &result);
  set_str(env, result, "transport", c.transport);
  if (c.why) set_str(env, result, "why", c.why);
  set_num(env, result, "ringRequests", (double)c.ring_requests);
  set_num(env, result, "devRequests", (double)c.dev_requests);
  set_num(env, result, "queues", c.queues);
  set_num(env, result, "depth", c.depth);
  napi_get_boolean(env, rings_passthrough(s->rings) != 0, &flagv);
  napi_set_named_property(env, result, "passthrough", flagv);
  return result;
}

/*
 * The `path | null` argument of a call: the file or folder opened with `flags` (made 0600 with O_CREAT),
 * -1 for null, or -2 once it threw: a type error for anything else, or `failing` and the reason.
 */
static int open_path_arg(napi_env env, napi_value arg, int flags, const char *usage, const char *failing) {
  napi_valuetype t = napi_undefined;
  napi_typeof(env, arg, &t);
  if (t == napi_null) return -1;
  if (t != napi_string) {
    char msg[160];
    snprintf(msg, sizeof(msg), "%s: expected a path or null", usage);
    napi_throw_type_error(env, NULL, msg);
    return -2;
  }
  char *path = get_string(env, arg);
  if (!path) {
    napi_throw_error(env, NULL, "out of memory");
    return -2;
  }
  int fd = open(path, flags, 0600);
  int err = errno;
  free(path);
  if (fd < 0) {
    char msg[160];
    snprintf(msg, sizeof(msg), "%s: %s", failing, strerror(err));
    napi_throw_error(env, NULL, msg);
    return -2;
  }
  return fd;
}

/*
 * spoolFolder(session, path | null): with passthrough, the files the engine creates get their spools in
 * the folder `path` (the upload journal's), under the ids their journal records have; null: none (their
 * creates are JavaScript's). Throws when the folder cannot be opened (nothing changes then).
 */
static napi_value js_spool_folder(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  session *s = session_args(env, info, 2, argv, "spoolFolder(session, path | null)");
  if (!s) return NULL;
  int fd = open_path_arg(env, argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC, "spoolFolder(session, path | null)", "cannot open the spool folder");
  if (fd == -2) return NULL;
  /* Its pool, if there is one (spools are made anew otherwise). */
  int pool = fd >= 0 ? openat(fd, ".pool", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  pthread_mutex_lock(&s->pool_lock);
  /* What was made ahead for the folder before goes back to its pool. */
  ready_return_locked(s, s->spool_dir_fd, s->pool_dir_fd);
  pthread_mutex_lock(&s->journal_lock);
  int old = s->spool_dir_fd;
  s->spool_dir_fd = fd;
  pthread_mutex_unlock(&s->journal_lock);
  int old_pool = s->pool_dir_fd;
  s->pool_dir_fd = pool;
  s->pool_count = 0;
  s->pool_empty_until = 0;
  /* The maker starts with the first folder that has a pool (once the session serves: destroy joins it). */
  if (fd >= 0 && pool >= 0 && !s->maker_started && !s->maker_stop && s->se) s->maker_started = pthread_create(&s->maker, NULL, maker_main, s) == 0;
  pthread_cond_broadcast(&s->maker_work);
  pthread_mutex_unlock(&s->pool_lock);
  if (old >= 0) close(old);
  if (old_pool >= 0) close(old_pool);
  napi_value undef;
  napi_get_undefined(env, &undef);
  return undef;
}

/*
 * journalSwitch(session, path | null) → the number of records written before the switch: the records
 * of closes answered here go to the file `path` from now on (made if missing, appended to), none with
 * null (closes are then JavaScript's). Throws when the file cannot be opened (nothing changes then).
 */
static napi_value js_journal_switch(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  session *s = session_args(env, info, 2, argv, "journalSwitch(session, path | null)");
  if (!s) return NULL;
  int fd = open_path_arg(env, argv[1], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, "journalSwitch(session, path | null)", "journalSwitch: opening the log failed");
  if (fd == -2) return NULL;
  off_t bytes = 0;
  if (fd >= 0) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
      char msg[160];
      snprintf(msg, sizeof(msg), "journalSwitch: opening the log failed: %s", strerror(errno));
      close(fd);
      napi_throw_error(env, NULL, msg);
      return NULL;
    }
    bytes = st.st_size;
  }
  pthread_mutex_lock(&s->journal_lock);
  int old = s->journal_fd;
  s->journal_fd = fd;
  s->journal_bytes = bytes;
  /* A new file starts on a line of its own: a record cut short in the old one stays there. */
  s->journal_torn = bytes > 0;
  double records = (double)s->journal_records;
  pthread_mutex_unlock(&s->journal_lock);
  if (old >= 0) close(old);
  napi_value result;
  napi_create_double(env, records, &result);
  return result;
}

/* A counter of the spool's threads (guarded by spool_lock), as a number: `syncs` picks which. */
static napi_value spool_counter(napi_env env, napi_callback_info info, const char *usage, int syncs) {
  napi_value argv[1];
  session *s = session_args(env, info, 1, argv, usage);
  if (!s) return NULL;
  pthread_mutex_lock(&s->spool_lock);
  double n = (double)(syncs ? s->spool_syncs : s->spool_writebacks);
  pthread_mutex_unlock(&s->spool_lock);
  napi_value result;
  napi_create_double(env, n, &result);
  return result;
}

/* spoolWritebacks(session) → how many times the hash thread started the writeback of spool bytes (writebackAheadKiB). */
static napi_value js_spool_writebacks(napi_env env, napi_callback_info info) {
  return spool_counter(env, info, "spoolWritebacks(session)", 0);
}

/* spoolSyncs(session) → how many background fdatasyncs of spools the sync thread made (syncAheadKiB). */
static napi_value js_spool_syncs(napi_env env, napi_callback_info info) {
  return spool_counter(env, info, "spoolSyncs(session)", 1);
}

static napi_value init(napi_env env, napi_value exports) {
  struct {
    const char *name;
    napi_callback fn;
  } fns[] = {
    { "mount", js_mount },
    { "unmount", js_unmount },
    { "destroy", js_destroy },
    { "replyErr", js_reply_err },
    { "replyEntry", js_reply_entry },
    { "replyNegative", js_reply_negative },
    { "replyAttr", js_reply_attr },
    { "replyOpen", js_reply_open },
    { "replyCreate", js_reply_create },
    { "replyOpenBacking", js_reply_open_backing },
    { "replyCreateBacking", js_reply_create_backing },
    { "backingOpen", js_backing_open },
    { "backingClose", js_backing_close },
    { "attrLive", js_attr_live },
    { "replyWrite", js_reply_write },
    { "replyXattrSize", js_reply_xattr },
    { "replyData", js_reply_data },
    { "replyFd", js_reply_fd },
    { "replyDir", js_reply_dir },
    { "replyDirPlus", js_reply_dir_plus },
    { "replyStatfs", js_reply_statfs },
    { "invalidateEntry", js_invalidate_entry },
    { "spoolAttach", js_spool_attach },
    { "spoolDetach", js_spool_detach },
    { "spoolWrite", js_spool_write },
    { "attrForget", js_attr_forget },
    { "folderNames", js_folder_names },
    { "namesForget", js_names_forget },
    { "pathsKept", js_paths_kept },
    { "answeredCounts", js_answered_counts },
    { "transport", js_transport },
    { "spoolWritebacks", js_spool_writebacks },
    { "spoolSyncs", js_spool_syncs },
    { "takeQueued", js_take_queued },
    { "journalSwitch", js_journal_switch },
    { "spoolFolder", js_spool_folder },
  };
  for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
    napi_value f;
    napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f);
    napi_set_named_property(env, exports, fns[i].name, f);
  }
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
