/*
 * The FUSE engine's internal header: the session every file of the engine works on, the records and
 * tables it keeps, and what the files share (each file's own helpers stay static there). As libfuse's
 * lib/ sits over fuse_i.h, the engine's files sit over this one, each file one concern:
 *
 *   session.c       the session's life: mount (settings, libfuse session, transport, threads), the reader
 *                   threads, unmount, destroy; the addon's exports
 *   lowlevel.c      the low-level operations table: each request queued for JavaScript, or answered here
 *                   (negative lookups, getattr from the cache, small writes, times, modes, releases)
 *   queue.c         request ids (slots of a table, with generations) and the queue to JavaScript
 *   attr_cache.c    the kernel attribute cache
 *   folder_names.c  the names of folders whose every name is known here
 *   created.c       creates answered here and the files followed for their close (answered closes)
 *   side_log.c      the log of answered closes (journalSwitch), journal ids, SHA-1
 *   close_record.c  the format of the records in that log (the engine's own; the journal reads them)
 *   spool_writer.c  direct spool writes, the hash thread and the sync thread
 *   spool_pool.c    the spool pool and the maker thread of spools made ahead
 *   passthrough.c   backing files (FUSE passthrough): registering them, the answers that carry them
 *   js_args.c       the N-API argument layer: request objects, batches, arguments of the calls
 *   js_replies.c    the reply calls (JavaScript answering a request)
 *   notify.c        what the kernel is told to forget (invalidateEntry, invalidateInode, notifyDelete)
 *   js_calls.c      the other calls (spools, attributes, names, paths, counters, folders, the log)
 *   rings.c         the transport: FUSE over io_uring under libfuse's session (rings.h)
 *   null_fs.c       the null file system of the benchmarks, built only into fuse3_bench.node
 *                   (CLOUDLIB_NULL_FILES; see binding.gyp)
 *
 * Reader threads take requests from the session's /dev/fuse descriptor (fuse_session_receive_buf +
 * fuse_session_process_buf); with FUSE over io_uring (rings.c), each CPU's ring thread hands libfuse the
 * requests of that CPU instead, and the handlers run the same on either. Each request is copied
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
 * back at close are answered here too (see "Answered here" in lowlevel.c) and reach JavaScript as records.
 *
 * Names of folders: for a folder whose every name JavaScript gave (a folder just made, a listing the
 * Vfs holds), lookups of other names are answered "no such entry" here, and creates there are answered
 * here too (the engine numbers the new file's inode and handle); JavaScript gets the create as a record,
 * ahead of anything about the file, and makes it in the Vfs.
 *
 * ---- Threads ----
 * - reader threads ("fuse-reader", up to 8) and, over io_uring, rings.c's ring threads: run the
 *   low-level operations (lowlevel.c, null_fs.c), so everything a handler touches is shared;
 * - the hash thread ("fuse-hash", spool_writer.c): hashes direct writes behind them, reports HASHED;
 * - the sync thread ("fuse-sync", spool_writer.c): background fdatasyncs of spools;
 * - the spool maker ("fuse-spools", spool_pool.c): spools made ahead for answered creates;
 * - the main thread (JavaScript: every js_* call, call_js) and libuv's workers (unmount, notify).
 *
 * ---- Lock order ----
 * Five locks of the session, taken only in this order (a lock may be taken while holding one above it,
 * never one below it while holding it):
 *
 *   spool_io (rwlock)  →  spool_lock  →  lock
 *   pool_lock  →  journal_lock
 *
 * - spool_io: held shared by each direct write from before it looks up its writer until its record is
 *   queued (ll_write, js_spool_write), exclusive by spoolAttach and spoolDetach. It guards no field: it
 *   keeps a detach from overtaking a write under way. Taken before spool_lock and lock.
 * - spool_lock: the spool writers and the hash and sync threads' work. A direct write queues its record
 *   (enqueue takes `lock`) while holding it, so `lock` comes after it. A reader thread waits on
 *   `hash_progress` (the hash too far behind its writes, spool_wait_hash) with spool_lock only, never
 *   spool_io: an attach or detach on the main thread (which takes spool_io exclusive) never waits for the
 *   hash. The hash thread takes neither spool_io nor anything after spool_lock while it works, and a
 *   detach wakes the waiters, so the wait always ends.
 * - lock: the queue, the slots, the attribute cache, the names of folders, the files followed for their
 *   close, the counters, the null file system's nodes. The innermost of the first chain: nothing of the
 *   session is taken while holding it (js_destroy answers pending requests with it held: rings.c's own
 *   locks, taken by every answer, come after every lock here).
 * - pool_lock: the spool pool and the spools made ahead; journal_lock is taken under it when the spool
 *   folder changes (js_spool_folder).
 * - journal_lock: the log of answered closes (journalSwitch) and the spool folder's descriptor (written
 *   under pool_lock and journal_lock both, so either lock gives a stable value; the main thread closes
 *   the old one once it let go of them). The innermost of the second chain. A create answered here reads
 *   both under it once and works on a duplicate of the folder's descriptor, never on the field itself
 *   (answer_create).
 * The two chains never nest: a thread holding a lock of one takes none of the other (answer_create,
 * answer_flush, null_backing and js_answered_counts take them one after the other).
 *
 * Fields below say which lock guards them. "mount": written by js_mount before any thread starts, read
 * only afterwards. "INIT": written by ll_init on the reader thread that answers INIT, before the kernel
 * sends any other request.
 */
#ifndef CLOUDLIB_ENGINE_I_H
#define CLOUDLIB_ENGINE_I_H

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
  OP_FALLOCATE = 29, OP_SYMLINK = 30, OP_READLINK = 31,
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

#define SLOT_BITS 20
#define SLOT_MAX (1u << SLOT_BITS)

/* The names of one folder (see folder_names.c); guarded by `lock`. */
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

/* A file created here and followed for its close (see created.c); guarded by `lock`. */
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

typedef struct session {
  /* mount (se: NULL once destroyed, on the main thread after the readers ended). */
  struct fuse_session *se;
  /* FUSE over io_uring (rings.c): the session's reads and answers go through it. mount. */
  fuse_rings *rings;
  int rings_want, ring_depth;
  napi_threadsafe_function tsfn;
  pthread_t readers[8];
  int reader_count;
  /* lock. */
  int readers_running;
  /* Not used. */
  int end_sent;

  /* Guards what it precedes down to spool_lock (the queue, the slots), and what says `lock` below. */
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
  /* Numbers every direct write's record (across handles), so a record is told apart from later attachments'. spool_lock. */
  uint64_t spool_seq;
  /* The hash thread: follows the writes of every writer; finishes the hashes of detached ones (`finishing`)
   * and reports each in a HASHED record. `hash_work` wakes it, `hash_progress` wakes writers waiting for it.
   * spool_lock (`hasher_started`: mount, and destroy after the join). */
  pthread_t hasher;
  int hasher_started, hasher_stop;
  pthread_cond_t hash_work, hash_progress;
  spool_writer *finishing;
  uint64_t hash_token;
  /* Once this many hashed bytes of a spool are not yet on their way to disk, the hash thread starts their
   * writeback (sync_file_range, not waiting): a later fsync finds them written. 0: never. mount. */
  uint64_t writeback_ahead;
  /* Writebacks started so far (guarded by spool_lock). */
  uint64_t spool_writebacks;
  /*
   * Once this many bytes of a spool's writeback were started since its last background sync, the sync
   * thread fdatasyncs it (on a duplicate descriptor, waiting for nobody): the disk's cache is emptied
   * while the data still comes, so the application's own fsync at the end has only the last of it to wait
   * for. 0: never. The descriptors to sync wait in `sync_fds` (guarded by spool_lock). `sync_ahead`,
   * `syncer_started`: mount (and destroy after the join); the rest spool_lock.
   */
  uint64_t sync_ahead;
  pthread_t syncer;
  int syncer_started, syncer_stop;
  pthread_cond_t sync_work;
  int sync_fds[SYNC_QUEUE_MAX];
  int sync_count;
  uint64_t spool_syncs;

  /* Asked for at INIT. mount. */
  unsigned max_write, max_readahead, max_background, congestion_threshold;
  int writeback, async_read;
  /* The OP_INIT record, queued once INIT is answered. INIT (taken by init_answered). */
  struct queued *init_record;
  /* Passthrough wanted when the kernel offers it (instead of the writeback cache: see "Passthrough"), and
   * refused to this process (no backing file may be registered: no CAP_SYS_ADMIN). `passthrough_want`:
   * mount; `backing_denied`: set once by a reader thread without a lock (a flag that only goes on). */
  int passthrough_want, backing_denied;
  /* What the kernel agreed to, reported once with OP_INIT. INIT. */
  unsigned got_max_write, got_max_readahead, got_max_background;
  int got_writeback;
  /* mount. */
  char *mountpoint;

  /* The attribute cache (guarded by `lock`; the `attrs` table itself: mount, freed by destroy). */
  int attr_cache; /* not used */
  attr_entry **attrs;
  uint32_t attr_count;
  uint64_t epoch;
  /* Small writes and setattr of times answered here (writeback cache only). `answer_small`: mount;
   * `answered_bytes`: lock. */
  int answer_small;
  size_t answered_bytes;
  /* What was answered here, for the mount's counters. lock. */
  uint64_t getattr_answered, writes_answered, times_answered, lookups_answered, modes_answered;

  /* The names of folders whose every name is known here (guarded by `lock`; see "Names of folders"). */
  struct name_set **names;
  uint32_t name_set_count;
  uint64_t names_held;
  /* The epoch of the last request that may add a name to a folder, and how many of them are unanswered. lock. */
  uint64_t names_epoch;
  int names_inflight;
  /* Files created here (answer_create): numbered from their own ranges; their owner and timeout.
   * `answer_creates`, `create_*`: mount; `next_ino`, `next_fh`, `creates_answered`: lock. */
  int answer_creates;
  uint64_t next_ino, next_fh;
  uint32_t create_uid, create_gid;
  double create_timeout;
  uint64_t creates_answered;
  /*
   * The longest name, in bytes, the Vfs takes (its rule, given at mount: `nameMaxBytes`; 0 when not given).
   * The engine answers a lookup or a create by name only for a name within it that is well-formed UTF-8;
   * every other name goes to JavaScript, which answers it by the Vfs's rules (ENAMETOOLONG, EINVAL,
   * EILSEQ). Mount.
   */
  unsigned name_max;
  /*
   * Free bytes the spools' disk must have for the close of a file the kernel wrote itself to be answered
   * here (`spoolMinFreeBytes`, the Vfs's rule: a write the kernel made and the disk refused is never seen,
   * so below it JavaScript closes the file, and fails it). 0: no such close is answered. Mount.
   */
  uint64_t spool_min_free;
  /*
   * Closes answered here (see "Closes answered here"): the files created here whose bytes the engine
   * follows (guarded by `lock`), and the log their journal records go to (`journal_lock`: one writer).
   */
  struct created_file *created;
  uint32_t created_count;
  size_t created_bytes;
  /* Renames so far: a path the engine was told before one of them may be stale. lock. */
  uint64_t paths_epoch;
  pthread_mutex_t journal_lock;
  /* journal_lock. */
  int journal_fd;
  /* The upload journal's spool folder (spoolFolder): files created here with passthrough get their spool
   * there. Written under pool_lock and journal_lock (js_spool_folder): read under either. */
  int spool_dir_fd;
  /* Its pool of emptied spools (a spool is taken from there before one is made), and names read from it.
   * pool_lock. */
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
  /* Bytes of the log file (a part-written record is cut off again; one that cannot be stays, and its
   * reader skips it). journal_lock, as the two below. */
  off_t journal_bytes;
  /* Records written to the logs so far (numbered from 1, across the files), and the last seq given. */
  uint64_t journal_records;
  uint64_t journal_seq;
  /* lock. */
  uint64_t closes_answered;

  /* The null file system (null_fs.c; the benchmark's addon only): its nodes by number, and by folder and
   * name. lock (the tables: mount, freed by destroy). */
  struct null_node **null_by_ino;
  fuse_ino_t null_count, null_room;
  struct null_node **null_by_name;
  /* With passthrough and a spool folder: the name (a number) of the next file a create is answered with.
   * journal_lock. */
  unsigned null_backing_next;
} session;

#define SESSION(req) ((session *)fuse_req_userdata(req))

#define NAPI_CALL(env, call)                                          \
  do {                                                                \
    if ((call) != napi_ok) {                                          \
      const napi_extended_error_info *info = NULL;                    \
      napi_get_last_error_info((env), &info);                         \
      napi_throw_error((env), NULL, info && info->error_message ? info->error_message : #call); \
      return NULL;                                                    \
    }                                                                 \
  } while (0)

/* Passthrough (see passthrough.c): the open answer's flag, and fuse_open_out of protocol 7.40: the backing
 * id where older ones had padding. */
#define FOPEN_PASSTHROUGH_FLAG (1u << 7)

typedef struct {
  uint64_t fh;
  uint32_t open_flags;
  int32_t backing_id;
} open_out;

/* ---- attr_cache.c: The attribute cache (all with `lock` held, but attr_fill, attr_forget and attr_cached, which take it). */
double now_s(void);
attr_entry *attr_find(session *s, fuse_ino_t ino, int create);
void attr_drop(session *s, fuse_ino_t ino);
void attr_changing(session *s, fuse_ino_t ino, int inflight);
void attr_changed(session *s, fuse_ino_t ino);
void attr_fill(session *s, const slot_info *info, const struct stat *st, double timeout);
void attr_forget(session *s, fuse_ino_t ino);
int attr_live(attr_entry *e, struct stat *st);
int attr_cached(session *s, fuse_ino_t ino, struct stat *st, double *left);

/* ---- folder_names.c: The names of folders (all with `lock` held, but names_forget, which takes it; name_answerable: none). */
name_set *names_find(session *s, fuse_ino_t ino);
void names_free(session *s, name_set *n);
void names_drop(session *s, fuse_ino_t ino);
int names_holds(const name_set *n, const char *name);
int names_put(session *s, name_set *n, const char *name);
void names_adding(session *s, fuse_ino_t ino, const char *name);
int name_answerable(const session *s, const char *name);
void names_forget(session *s, fuse_ino_t ino);

/* ---- queue.c: Request ids and the queue to JavaScript (each takes `lock`, but slot_peek: with `lock` held). */
fuse_req_t slot_take_info(session *s, double id, slot_info *info);
fuse_req_t slot_take(session *s, double id);
slot *slot_peek(session *s, double id);
void enqueue_quiet(session *s, queued *q);
void enqueue(session *s, queued *q);
queued *new_queued_naming(session *s, int op, fuse_req_t req, fuse_ino_t ino, fuse_ino_t change, fuse_ino_t change2, fuse_ino_t names_folder, const char *name);
queued *new_queued_changing(session *s, int op, fuse_req_t req, fuse_ino_t ino, fuse_ino_t change, fuse_ino_t change2);
queued *new_queued(session *s, int op, fuse_req_t req, fuse_ino_t ino);
char *copy_bytes(const char *p, size_t n);
void free_queued(queued *q);

/* ---- lowlevel.c: The low-level operations (ll_ops: the table libfuse runs). */
void ll_init(void *userdata, struct fuse_conn_info *conn);
void init_answered(void *arg);
double timespec_ms(const struct timespec *t);
extern const struct fuse_lowlevel_ops ll_ops;

/* ---- created.c: Creates and closes answered here (created_find, created_take: with `lock` held). */
created_file *created_find(session *s, uint64_t fh);
created_file *created_take(session *s, uint64_t fh);
void created_free(created_file *c);
void created_write(session *s, created_file *c, const char *buf, size_t size, off_t off);
void created_spoil(session *s, fuse_ino_t ino);
void created_unlinked(session *s, fuse_ino_t parent, const char *name);
uint64_t paths_changed(session *s, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname);
int answer_flush(session *s, fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
int answer_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi);

/* ---- side_log.c: The log of closes answered here, journal ids, SHA-1. */
void hex_of(const unsigned char *bytes, size_t n, char *out);
int new_journal_id(char id[17]);
const EVP_MD *sha1_md(void);
int journal_has_room(session *s, uint64_t more);
uint64_t journal_append(session *s, created_file *c, char **record, size_t *len);

/* ---- close_record.c: The engine's close record (its format: close_record.c's opening comment). */
#define CLOSE_RECORD_HEAD 76
#define CLOSE_RECORD_CHECK 8
#define CLOSE_RECORD_KIND_CLOSE 1
#define CLOSE_RECORD_CONTENT_MAX (64u * 1024)
typedef struct {
  char id[17];
  const char *library, *fullpath;
  int64_t mtime_ns;
  uint64_t created_ms, seq;
  const void *data;
  size_t size;
} close_record_fields;
unsigned char *close_record_encode(const close_record_fields *f, size_t *len);
napi_value js_encode_close_record(napi_env env, napi_callback_info info);

/* ---- spool_writer.c: Direct spool writes, the hash thread and the sync thread (spool_find, spool_unlink, spool_retire: with spool_lock held; spool_wait_hash: with no lock held). */
spool_writer *spool_find(session *s, uint64_t fh);
int spool_hash_alive(const spool_writer *w);
ssize_t spool_write(session *s, uint64_t fh, const char *buf, size_t size, off_t off, int *found);
void spool_wait_hash(session *s, uint64_t fh);
void spool_free(spool_writer *w);
spool_writer *spool_unlink(session *s, uint64_t fh);
void spool_retire(session *s, spool_writer *w);
int spool_digest(spool_writer *w, char *hex);
void *hasher_main(void *arg);
void *syncer_main(void *arg);
void stop_hasher(session *s);

/* ---- spool_pool.c: The spool pool and the spools made ahead (ready_return_locked: with pool_lock held). */
int spool_make(session *s, int spool_dir, const char *id);
void *maker_main(void *arg);
int spool_take_ready(session *s, char id[17]);
void ready_return_locked(session *s, int spool_dir, int pool_dir);
void stop_thread(pthread_mutex_t *lock, int *stop, pthread_cond_t *wake, int *started, pthread_t thread);
void stop_maker(session *s);

/* ---- passthrough.c: Backing files (passthrough). */
int backing_open(session *s, int fd);
int backing_close(session *s, int id);
int reply_create_backing(fuse_req_t req, const struct fuse_entry_param *e, uint64_t fh, int backing);

/* ---- js_args.c: The N-API argument layer. */
void set_num(napi_env env, napi_value obj, const char *key, double v);
void set_str(napi_env env, napi_value obj, const char *key, const char *v);
void call_js(napi_env env, napi_value js_cb, void *context, void *data);
session *session_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv, const char *usage);
napi_value js_take_queued(napi_env env, napi_callback_info info);
session *get_session(napi_env env, napi_value v);
int get_u32_prop(napi_env env, napi_value obj, const char *key, unsigned *out);
char *get_string(napi_env env, napi_value v);
napi_value bool_value(napi_env env, int b);
int arg_request_info(napi_env env, napi_callback_info info, size_t want, napi_value *argv, session **s, fuse_req_t *req, slot_info *sinfo);
int arg_request(napi_env env, napi_callback_info info, size_t want, napi_value *argv, session **s, fuse_req_t *req);
void stat_from_fields(const double *f, struct stat *st);
int get_stat(napi_env env, napi_value arr, struct stat *st);
double get_double(napi_env env, napi_value v);

/* ---- js_replies.c: The reply calls (registered by session.c). */
napi_value js_reply_err(napi_env env, napi_callback_info info);
napi_value js_reply_entry(napi_env env, napi_callback_info info);
napi_value js_reply_negative(napi_env env, napi_callback_info info);
napi_value js_reply_attr(napi_env env, napi_callback_info info);
napi_value js_reply_open(napi_env env, napi_callback_info info);
napi_value js_backing_open(napi_env env, napi_callback_info info);
napi_value js_backing_close(napi_env env, napi_callback_info info);
napi_value js_reply_open_backing(napi_env env, napi_callback_info info);
napi_value js_reply_create(napi_env env, napi_callback_info info);
napi_value js_reply_create_backing(napi_env env, napi_callback_info info);
napi_value js_reply_write(napi_env env, napi_callback_info info);
napi_value js_reply_xattr(napi_env env, napi_callback_info info);
napi_value js_reply_data(napi_env env, napi_callback_info info);
napi_value js_reply_fd(napi_env env, napi_callback_info info);
napi_value js_reply_dir(napi_env env, napi_callback_info info);
napi_value js_reply_dir_plus(napi_env env, napi_callback_info info);
napi_value js_reply_statfs(napi_env env, napi_callback_info info);

/* ---- notify.c: The kernel told to forget what it cached (registered by session.c). */
napi_value js_invalidate_entry(napi_env env, napi_callback_info info);
napi_value js_invalidate_inode(napi_env env, napi_callback_info info);
napi_value js_notify_delete(napi_env env, napi_callback_info info);

/* ---- js_calls.c: The other calls (registered by session.c). */
napi_value js_spool_attach(napi_env env, napi_callback_info info);
napi_value js_spool_detach(napi_env env, napi_callback_info info);
napi_value js_spool_write(napi_env env, napi_callback_info info);
napi_value js_attr_forget(napi_env env, napi_callback_info info);
napi_value js_attr_live(napi_env env, napi_callback_info info);
napi_value js_folder_names(napi_env env, napi_callback_info info);
napi_value js_paths_kept(napi_env env, napi_callback_info info);
napi_value js_names_forget(napi_env env, napi_callback_info info);
napi_value js_answered_counts(napi_env env, napi_callback_info info);
napi_value js_transport(napi_env env, napi_callback_info info);
napi_value js_spool_folder(napi_env env, napi_callback_info info);
napi_value js_journal_switch(napi_env env, napi_callback_info info);
napi_value js_spool_writebacks(napi_env env, napi_callback_info info);
napi_value js_spool_syncs(napi_env env, napi_callback_info info);

#ifdef CLOUDLIB_NULL_FILES
/* ---- null_fs.c: the null file system (the benchmark's addon only). */
extern const struct fuse_lowlevel_ops null_ops;
/* Its root folder, made at mount: 0 when out of memory. */
int null_fs_start(session *s);
/* Frees its nodes (`lock` held, at destroy). */
void null_fs_free(session *s);
#endif

#endif
