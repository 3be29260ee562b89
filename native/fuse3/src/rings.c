/*
 * FUSE over io_uring under libfuse 3's low-level session.
 *
 * Since Linux 6.14 a FUSE connection may carry its requests over io_uring instead of read/writev on
 * /dev/fuse: each CPU has a queue of request buffers registered with the kernel (a command on the
 * /dev/fuse descriptor, IORING_OP_URING_CMD, one per buffer). A request made on a CPU arrives as the
 * completion of one of that CPU's commands, its header and fixed argument in the buffer's header, its
 * name or data in the buffer's payload; its answer goes back in the same buffer, with the command that
 * commits it and fetches the next request (COMMIT_AND_FETCH). The kernel offers this at INIT only while
 * the module parameter fuse.enable_uring is on. Forgets, interrupts and notifications stay on /dev/fuse.
 *
 * libfuse 3.14 knows nothing of it: the session's reads and answers go through custom I/O (rings_read,
 * rings_writev). At INIT the init callback makes the rings (rings_prepare), and the answer to INIT asks
 * for them. Each request a ring delivers is laid out as /dev/fuse would have delivered it (its header and
 * fixed argument put just before the payload, in room left there: no copy of the payload) and handed to
 * libfuse's processing on the ring's thread, so the engine's handlers run as they do for /dev/fuse. Its
 * unique is noted; the answer libfuse writes (from any thread: the ring's, JavaScript's main thread) is
 * recognised by it and copied into the buffer, which the answering thread commits (one mutex a queue
 * keeps the ring's submissions in order). An answer to anything else goes to /dev/fuse.
 *
 * Every buffer holds one request until it is answered. A queue has `depth` of them; further requests
 * made on that CPU wait in the kernel until one is answered.
 */
#define _GNU_SOURCE
#include "rings.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <sys/eventfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The io_uring part of the kernel's protocol (7.42), missing from older kernel headers. */
#define OVER_IO_URING (1ULL << 41)
/* FUSE passthrough (Linux 6.9): opens may name a backing file that the kernel reads and writes itself. */
#define PASSTHROUGH_FLAG (1ULL << 37)
/* Backing files may sit on a stacked file system (overlayfs): the deepest the kernel allows. */
#define PASSTHROUGH_STACK_DEPTH 2
#define URING_HEADER_SZ 128
struct ring_ent_in_out {
  uint64_t flags, commit_id;
  uint32_t payload_sz, padding;
  uint64_t reserved;
};
struct ring_req_header {
  char in_out[URING_HEADER_SZ]; /* fuse_in_header on arrival, fuse_out_header in the answer */
  char op_in[URING_HEADER_SZ];  /* the request's fixed argument (fuse_write_in, ...) */
  struct ring_ent_in_out ent;
};
struct ring_cmd {
  uint64_t flags, commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
enum { RING_REGISTER = 1, RING_COMMIT_AND_FETCH = 2 };

/* Room before each payload, where a request's header and fixed argument are put for libfuse. */
#define PREFIX 4096
/* The kernel's smallest request buffer (FUSE_MIN_READ_BUFFER). */
#define MIN_PAYLOAD 8192
/* user_data of the no-op that wakes a ring's thread, and of its read of the commits handed to it. */
#define WAKE UINT64_MAX
#define HANDED (UINT64_MAX - 1)

struct ring_queue;

typedef struct ring_entry {
  struct ring_queue *q;
  uint64_t index;
  struct ring_req_header *header;
  /* PREFIX bytes, then the payload. */
  char *area;
  struct iovec iov[2];
  /* The request held while it is answered (0: none), and the next entry of its bucket in `held`. */
  uint64_t unique;
  struct ring_entry *next;
  /* The kernel ended its command with an error: it carries nothing more. */
  int dead;
} ring_entry;

typedef struct ring_queue {
  fuse_rings *r;
  int qid;
  struct io_uring ring;
  int ring_made;
  /* Submissions to the ring, and `closed` (set when the thread ends: answers are dropped after it). */
  pthread_mutex_t lock;
  int closed;
  pthread_t thread;
  int thread_made;
  ring_entry *entries;
  /*
   * Answers given on other threads (JavaScript's) are committed by the ring's own thread: the command
   * that commits an answer fetches the next request, and the kernel copies that request into the buffer
   * in the context of whoever submitted the command. The answering thread writes the answer into the
   * buffer, lists the entry in `handed` (under `lock`) and signals `handed_fd`, which the ring's thread
   * keeps a read of in flight.
   */
  int handed_fd;
  /* A read of handed_fd is in flight (changed on the ring's thread only). */
  int handed_armed;
  uint64_t handed_count;
  ring_entry **handed;
  int nhanded;
} ring_queue;

/* The queue whose thread this is (NULL on any other thread). */
static __thread ring_queue *own_queue;

struct fuse_rings {
  struct fuse_session *se;
  int fd, want, depth;
  /* INIT: its unique until answered, and whether the kernel offered the rings, and passthrough. */
  uint64_t init_unique;
  int offered;
  int passthrough_offered;
  /* The answer to INIT asks for passthrough (rings_ask_passthrough); the kernel took that answer. */
  int passthrough_asked, passthrough;
  /* Told once the answer to INIT was written (rings_on_init_answered). */
  void (*init_answered)(void *);
  void *init_arg;
  /* The rings are made and INIT's answer asks (asked) for them; 0 again if they could not be used. */
  int prepared;
  const char *why;
  size_t payload;
  int nqueues;
  ring_queue *queues;
  /* `held`, `go`, `stopping`, `why` and `prepared` once the threads run. */
  pthread_mutex_t lock;
  pthread_cond_t changed;
  /* The entries whose requests are being answered, by unique (buckets of size mask + 1). */
  ring_entry **held;
  uint64_t mask;
  /* 1: the threads serve; -1: they end without serving (the rings were not taken up). */
  int go;
  int stopping;
  uint64_t ring_requests, dev_requests;
};

static const char WHY_NOT_ASKED[] = "FUSE over io_uring was not asked for (transport \"dev\")";
static const char WHY_NOT_OFFERED[] = "the kernel does not offer FUSE over io_uring (Linux 6.14 or later, with the fuse module's enable_uring parameter on)";
static const char WHY_NO_MEMORY[] = "no memory for the rings";
static const char WHY_IO_URING[] = "io_uring cannot be set up in this process (io_uring_queue_init failed)";
static const char WHY_THREAD[] = "a ring's thread cannot be started";
static const char WHY_INIT[] = "the answer to INIT did not take the rings";
static const char WHY_REGISTER[] = "the kernel refused the rings' buffers (FUSE_IO_URING_CMD_REGISTER failed)";

/* CPUs the kernel may have (its queues are one a possible CPU): /sys/devices/system/cpu/possible. */
static int possible_cpus(void) {
  FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
  int highest = -1;
  if (f) {
    char line[256];
    if (fgets(line, sizeof(line), f)) {
      /* Ranges and single CPUs, comma-separated: "0-3,8". */
      for (char *p = line;;) {
        char *end;
        long cpu = strtol(p, &end, 10);
        if (end == p) break;
        if (*end == '-') cpu = strtol(end + 1, &end, 10);
        if (cpu > highest) highest = (int)cpu;
        if (*end != ',') break;
        p = end + 1;
      }
    }
    fclose(f);
  }
  if (highest < 0) {
    long n = sysconf(_SC_NPROCESSORS_CONF);
    return n > 0 ? (int)n : 1;
  }
  return highest + 1;
}

fuse_rings *rings_new(struct fuse_session *se, int fd, int want, int depth) {
  fuse_rings *r = calloc(1, sizeof(fuse_rings));
  if (!r) return NULL;
  r->se = se;
  r->fd = fd;
  r->want = want;
  r->depth = depth < 1 ? 1 : depth > 256 ? 256 : depth;
  r->why = want ? WHY_NOT_OFFERED : WHY_NOT_ASKED;
  pthread_mutex_init(&r->lock, NULL);
  pthread_cond_init(&r->changed, NULL);
  return r;
}

/* ---- the table of requests being answered ---------------------------------------------------- */

static uint64_t bucket_of(const fuse_rings *r, uint64_t unique) {
  return (unique >> 1) & r->mask; /* the kernel numbers requests in steps of 2 */
}

static void held_put(fuse_rings *r, ring_entry *e, uint64_t unique) {
  pthread_mutex_lock(&r->lock);
  e->unique = unique;
  uint64_t b = bucket_of(r, unique);
  e->next = r->held[b];
  r->held[b] = e;
  pthread_mutex_unlock(&r->lock);
}

static ring_entry *held_take(fuse_rings *r, uint64_t unique) {
  pthread_mutex_lock(&r->lock);
  if (!r->held) {
    pthread_mutex_unlock(&r->lock);
    return NULL;
  }
  ring_entry **p = &r->held[bucket_of(r, unique)];
  while (*p && (*p)->unique != unique) p = &(*p)->next;
  ring_entry *e = *p;
  if (e) {
    *p = e->next;
    e->next = NULL;
    e->unique = 0;
  }
  pthread_mutex_unlock(&r->lock);
  return e;
}

/* ---- submissions ---------------------------------------------------------------------------- */

/* A ring of 128-byte SQEs (SQE128): the command area is the second half, past what the type declares. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
static void prep_command(struct io_uring_sqe *sqe, int fd, ring_entry *e, int cmd, uint64_t commit_id) {
  memset(sqe, 0, 128);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd;
  sqe->cmd_op = cmd;
  sqe->addr = (uint64_t)(uintptr_t)e->iov;
  sqe->len = 2;
  sqe->user_data = e->index;
  struct ring_cmd *c = (void *)sqe->cmd;
  c->qid = (uint16_t)e->q->qid;
  c->commit_id = commit_id;
}
#pragma GCC diagnostic pop

/* With q->lock held. 0, or -errno (the ring is full or the kernel refuses the submission). */
static int submit_locked(ring_queue *q) {
  for (int tries = 0;; tries++) {
    int n = io_uring_submit(&q->ring);
    if (n >= 0) return 0;
    if ((n != -EINTR && n != -EAGAIN && n != -EBUSY) || tries >= 1000) return n;
    if (n != -EINTR) usleep(100);
  }
}

static struct io_uring_sqe *sqe_locked(ring_queue *q) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
  if (!sqe && submit_locked(q) == 0) sqe = io_uring_get_sqe(&q->ring);
  return sqe;
}

/* The request whose answer is in `e`'s buffer (its out header's unique): what its commit names. */
static uint64_t answered_unique(const ring_entry *e) {
  uint64_t unique;
  memcpy(&unique, e->header->in_out + offsetof(struct fuse_out_header, unique), sizeof(unique));
  return unique;
}

/* Commits the answer now in `e`'s buffer and fetches the next request into it (on the ring's thread). */
static int commit(ring_entry *e) {
  ring_queue *q = e->q;
  int err = 0;
  int wake = 0;
  pthread_mutex_lock(&q->lock);
  if (q->closed) {
    /* The connection is gone: nothing more is committed. */
  } else if (own_queue != q) {
    q->handed[q->nhanded++] = e;
    wake = q->nhanded == 1;
  } else {
    struct io_uring_sqe *sqe = sqe_locked(q);
    if (!sqe) err = -EBUSY;
    else {
      prep_command(sqe, q->r->fd, e, RING_COMMIT_AND_FETCH, answered_unique(e));
      err = submit_locked(q);
    }
  }
  pthread_mutex_unlock(&q->lock);
  if (wake) {
    uint64_t one = 1;
    while (write(q->handed_fd, &one, sizeof(one)) < 0 && errno == EINTR) {}
  }
  return err;
}

/* With q->lock held: a read of `handed_fd` in flight, so that a hand-over wakes the ring's thread. */
static void arm_handed_locked(ring_queue *q) {
  struct io_uring_sqe *sqe = sqe_locked(q);
  if (!sqe) return;
  io_uring_prep_read(sqe, q->handed_fd, &q->handed_count, sizeof(q->handed_count), 0);
  sqe->user_data = HANDED;
  q->handed_armed = 1;
}

/* On the ring's thread: commits the answers handed to it, and reads `handed_fd` again (`rearm`). */
static void commit_handed(ring_queue *q, int rearm) {
  pthread_mutex_lock(&q->lock);
  for (int i = 0; i < q->nhanded; i++) {
    struct io_uring_sqe *sqe = sqe_locked(q);
    if (!sqe) break;
    prep_command(sqe, q->r->fd, q->handed[i], RING_COMMIT_AND_FETCH, answered_unique(q->handed[i]));
  }
  q->nhanded = 0;
  if (rearm) arm_handed_locked(q);
  submit_locked(q);
  pthread_mutex_unlock(&q->lock);
}

/* The answer libfuse wrote for the request `e` holds: into the buffer, then committed. */
static ssize_t answer_ring(ring_entry *e, const struct iovec *iov, int count) {
  fuse_rings *r = e->q->r;
  size_t total = 0;
  for (int i = 0; i < count; i++) total += iov[i].iov_len;
  struct fuse_out_header oh;
  memcpy(&oh, iov[0].iov_base, sizeof(oh));
  size_t len = total - sizeof(oh);
  char *payload = e->area + PREFIX;
  if (len > r->payload) {
    oh.error = -EIO;
    len = 0;
  } else {
    char *p = payload;
    for (int i = 0; i < count; i++) {
      size_t skip = i == 0 ? sizeof(oh) : 0;
      if (iov[i].iov_len > skip) {
        memcpy(p, (const char *)iov[i].iov_base + skip, iov[i].iov_len - skip);
        p += iov[i].iov_len - skip;
      }
    }
  }
  oh.len = (uint32_t)(sizeof(oh) + len);
  memcpy(e->header->in_out, &oh, sizeof(oh));
  e->header->ent.payload_sz = (uint32_t)len;
  int err = commit(e);
  if (err) {
    errno = -err;
    return -1;
  }
  return (ssize_t)total;
}

/* ---- a queue's thread --------------------------------------------------------------------------- */

/* A request the kernel put in `e`: laid out as /dev/fuse delivers it and handed to libfuse. */
static void serve(fuse_rings *r, ring_entry *e) {
  struct fuse_in_header in;
  memcpy(&in, e->header->in_out, sizeof(in));
  uint32_t payload_sz = e->header->ent.payload_sz;
  size_t arg0 = in.len >= sizeof(in) + payload_sz ? in.len - sizeof(in) - payload_sz : SIZE_MAX;
  if (arg0 > URING_HEADER_SZ || payload_sz > r->payload) {
    /* Not a request this protocol can carry: answered with an error so the buffer comes back. */
    struct fuse_out_header oh = { .len = sizeof(oh), .error = -EIO, .unique = in.unique };
    struct iovec iov = { &oh, sizeof(oh) };
    answer_ring(e, &iov, 1);
    return;
  }
  char *start = e->area + PREFIX - sizeof(in) - arg0;
  memcpy(start, &in, sizeof(in));
  memcpy(start + sizeof(in), e->header->op_in, arg0);
  __atomic_add_fetch(&r->ring_requests, 1, __ATOMIC_RELAXED);
  held_put(r, e, in.unique);
  struct fuse_buf buf = { .size = in.len, .mem = start };
  fuse_session_process_buf(r->se, &buf);
}

static void *queue_main(void *arg) {
  ring_queue *q = arg;
  fuse_rings *r = q->r;
  own_queue = q;
  char name[16];
  snprintf(name, sizeof(name), "fuse-ring%d", q->qid);
  pthread_setname_np(pthread_self(), name);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(q->qid, &cpus);
  pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus); /* best effort: requests of CPU qid come here */

  pthread_mutex_lock(&r->lock);
  while (!r->go && !r->stopping) pthread_cond_wait(&r->changed, &r->lock);
  int serving = r->go > 0 && !r->stopping;
  pthread_mutex_unlock(&r->lock);

  int dead = 0;
  if (serving) {
    pthread_mutex_lock(&q->lock);
    for (int i = 0; i < r->depth; i++) {
      struct io_uring_sqe *sqe = sqe_locked(q);
      if (!sqe) break;
      prep_command(sqe, r->fd, &q->entries[i], RING_REGISTER, 0);
    }
    arm_handed_locked(q);
    int err = submit_locked(q);
    pthread_mutex_unlock(&q->lock);
    if (err) serving = 0;
  }
  while (serving) {
    struct io_uring_cqe *cqe;
    /* Woken by a completion, by rings_stop's no-op, or every second to look at `stopping` (the rings'
     * kernels all have IORING_FEAT_EXT_ARG: the wait takes no submission entry, so it needs no lock). */
    struct __kernel_timespec second = { .tv_sec = 1 };
    int err = io_uring_wait_cqe_timeout(&q->ring, &cqe, &second);
    if (err == -ETIME || err == -EINTR) {
      pthread_mutex_lock(&r->lock);
      int stopping = r->stopping;
      pthread_mutex_unlock(&r->lock);
      if (stopping) break;
      /* Answers handed over and not committed (their wake-up could not be read): committed now. */
      pthread_mutex_lock(&q->lock);
      int handed = q->nhanded;
      pthread_mutex_unlock(&q->lock);
      if (handed > 0 || !q->handed_armed) commit_handed(q, !q->handed_armed);
      continue;
    }
    if (err) break;
    uint64_t data = cqe->user_data;
    int res = cqe->res;
    io_uring_cqe_seen(&q->ring, cqe);
    pthread_mutex_lock(&r->lock);
    int stopping = r->stopping;
    pthread_mutex_unlock(&r->lock);
    if (stopping) break;
    if (data == HANDED) {
      q->handed_armed = 0;
      /* A failed read (the ring is going) is not made again at once: the next second's look does. */
      commit_handed(q, res >= 0);
      continue;
    }
    if (data == WAKE || data >= (uint64_t)r->depth) continue;
    ring_entry *e = &q->entries[data];
    if (res < 0) {
      /* Refused (the connection is gone, or the kernel would not take the buffers: it then went back to
       * /dev/fuse for every request) or cancelled. The buffer carries nothing more. */
      if (!e->dead) dead++;
      e->dead = 1;
      if (res == -EOPNOTSUPP || res == -EINVAL) {
        pthread_mutex_lock(&r->lock);
        r->why = WHY_REGISTER;
        r->prepared = 0;
        pthread_mutex_unlock(&r->lock);
      }
      if (dead == r->depth) break;
      continue;
    }
    serve(r, e);
  }
  pthread_mutex_lock(&q->lock);
  q->closed = 1;
  pthread_mutex_unlock(&q->lock);
  return NULL;
}

/* ---- INIT ---------------------------------------------------------------------------------------- */

static void free_queues(fuse_rings *r) {
  for (int i = 0; r->queues && i < r->nqueues; i++) {
    ring_queue *q = &r->queues[i];
    if (q->ring_made) io_uring_queue_exit(&q->ring);
    for (int j = 0; q->entries && j < r->depth; j++) {
      free(q->entries[j].header);
      free(q->entries[j].area);
    }
    free(q->entries);
    free(q->handed);
    if (q->handed_fd >= 0) close(q->handed_fd);
    pthread_mutex_destroy(&q->lock);
  }
  free(r->queues);
  r->queues = NULL;
  pthread_mutex_lock(&r->lock);
  free(r->held);
  r->held = NULL;
  pthread_mutex_unlock(&r->lock);
  r->nqueues = 0;
}

/* Tells threads made at INIT to end without serving, joins them and frees the rings (why: the reason). */
static void give_up(fuse_rings *r, const char *why) {
  pthread_mutex_lock(&r->lock);
  r->go = -1;
  r->prepared = 0;
  r->why = why;
  pthread_cond_broadcast(&r->changed);
  pthread_mutex_unlock(&r->lock);
  for (int i = 0; i < r->nqueues; i++)
    if (r->queues[i].thread_made) pthread_join(r->queues[i].thread, NULL);
  free_queues(r);
}

void rings_prepare(fuse_rings *r, unsigned max_write) {
  if (!r || !r->want || !r->offered) return;
  long page = sysconf(_SC_PAGESIZE);
  size_t payload = max_write > MIN_PAYLOAD ? max_write : MIN_PAYLOAD;
  payload = (payload + (size_t)page - 1) / (size_t)page * (size_t)page;
  r->payload = payload;
  r->nqueues = possible_cpus();
  r->queues = calloc((size_t)r->nqueues, sizeof(ring_queue));
  for (int i = 0; r->queues && i < r->nqueues; i++) r->queues[i].handed_fd = -1;
  uint64_t buckets = 16;
  while (buckets < (uint64_t)r->nqueues * (uint64_t)r->depth * 2) buckets *= 2;
  r->held = calloc(buckets, sizeof(ring_entry *));
  r->mask = buckets - 1;
  if (!r->queues || !r->held) {
    free_queues(r);
    r->why = WHY_NO_MEMORY;
    return;
  }
  const char *why = NULL;
  for (int i = 0; i < r->nqueues && !why; i++) {
    ring_queue *q = &r->queues[i];
    q->r = r;
    q->qid = i;
    pthread_mutex_init(&q->lock, NULL);
    q->entries = calloc((size_t)r->depth, sizeof(ring_entry));
    q->handed = calloc((size_t)r->depth, sizeof(ring_entry *));
    q->handed_fd = eventfd(0, EFD_CLOEXEC);
    if (!q->entries || !q->handed || q->handed_fd < 0) {
      why = WHY_NO_MEMORY;
      break;
    }
    for (int j = 0; j < r->depth; j++) {
      ring_entry *e = &q->entries[j];
      e->q = q;
      e->index = (uint64_t)j;
      e->header = aligned_alloc((size_t)page, (size_t)page);
      e->area = aligned_alloc((size_t)page, PREFIX + payload);
      if (!e->header || !e->area) {
        why = WHY_NO_MEMORY;
        break;
      }
      memset(e->header, 0, sizeof(struct ring_req_header));
      e->iov[0] = (struct iovec){ e->header, sizeof(struct ring_req_header) };
      e->iov[1] = (struct iovec){ e->area + PREFIX, payload };
    }
    if (why) break;
    /* Room for every buffer's command, the read of handed answers and a wake-up; completions twice that. */
    unsigned entries = 2;
    while (entries < (unsigned)r->depth + 2) entries *= 2;
    struct io_uring_params params;
    memset(&params, 0, sizeof(params));
    params.flags = IORING_SETUP_SQE128;
    if (io_uring_queue_init_params(entries, &q->ring, &params) != 0) {
      why = WHY_IO_URING;
      break;
    }
    q->ring_made = 1;
    if (!(params.features & IORING_FEAT_EXT_ARG)) {
      why = WHY_IO_URING;
      break;
    }
  }
  /* Every queue's thread is running before INIT asks for the rings: the kernel holds every request
   * until all queues have registered, so a queue that could not would stop the mount. */
  for (int i = 0; i < r->nqueues && !why; i++) {
    if (pthread_create(&r->queues[i].thread, NULL, queue_main, &r->queues[i]) != 0) why = WHY_THREAD;
    else r->queues[i].thread_made = 1;
  }
  if (why) {
    give_up(r, why);
    return;
  }
  r->prepared = 1;
  r->why = NULL;
}

/*
 * The answer to INIT: asks for the rings when they are made (then lets their threads register), and for
 * passthrough when the init callback wanted it. libfuse 3.14 knows neither: both are patched in here.
 */
static ssize_t answer_init(fuse_rings *r, int fd, struct iovec *iov, int count) {
  r->init_unique = 0;
  int rings = r->prepared, pass = r->passthrough_asked;
  if (!rings && !pass) return writev(fd, iov, count);
  struct fuse_out_header oh;
  memcpy(&oh, iov[0].iov_base, sizeof(oh));
  struct fuse_init_out out;
  memset(&out, 0, sizeof(out));
  /* The stack depth is the 32 bits right after flags2 (protocol 7.40). */
  size_t depth_at = offsetof(struct fuse_init_out, flags2) + sizeof(out.flags2);
  if (oh.error != 0 || count != 2 || iov[1].iov_len < depth_at + sizeof(uint32_t) || iov[1].iov_len > sizeof(out)) {
    if (rings) give_up(r, WHY_INIT);
    r->passthrough_asked = 0;
    return writev(fd, iov, count);
  }
  memcpy(&out, iov[1].iov_base, iov[1].iov_len);
  if (rings) {
    long page = sysconf(_SC_PAGESIZE);
    size_t need = out.max_write > MIN_PAYLOAD ? out.max_write : MIN_PAYLOAD;
    if ((size_t)out.max_pages * (size_t)page > need) need = (size_t)out.max_pages * (size_t)page;
    if (need > r->payload) {
      give_up(r, WHY_INIT);
      rings = 0;
    } else {
      out.flags |= FUSE_INIT_EXT;
      out.flags2 |= (uint32_t)(OVER_IO_URING >> 32);
    }
  }
  if (pass) {
    out.flags |= FUSE_INIT_EXT;
    out.flags2 |= (uint32_t)(PASSTHROUGH_FLAG >> 32);
    uint32_t depth = PASSTHROUGH_STACK_DEPTH;
    memcpy((char *)&out + depth_at, &depth, sizeof(depth));
  }
  struct iovec patched[2] = { iov[0], { &out, iov[1].iov_len } };
  ssize_t res = writev(fd, patched, 2);
  if (res < 0) {
    int saved = errno;
    if (rings) give_up(r, WHY_INIT);
    r->passthrough_asked = 0;
    errno = saved;
    return res;
  }
  r->passthrough = pass;
  if (!rings) return res;
  /* The kernel took the answer (the connection is initialised when writev returns): register. */
  pthread_mutex_lock(&r->lock);
  r->go = 1;
  pthread_cond_broadcast(&r->changed);
  pthread_mutex_unlock(&r->lock);
  return res;
}

int rings_passthrough_offered(fuse_rings *r) {
  return r && r->passthrough_offered;
}

void rings_ask_passthrough(fuse_rings *r) {
  if (r && r->passthrough_offered) r->passthrough_asked = 1;
}

int rings_passthrough(fuse_rings *r) {
  return r && r->passthrough;
}

void rings_on_init_answered(fuse_rings *r, void (*fn)(void *), void *arg) {
  if (!r) return;
  r->init_answered = fn;
  r->init_arg = arg;
}

/* ---- custom I/O ------------------------------------------------------------------------------------ */

ssize_t rings_read(fuse_rings *r, int fd, void *buf, size_t len) {
  ssize_t n = read(fd, buf, len);
  if (!r || n < (ssize_t)sizeof(struct fuse_in_header)) return n;
  const struct fuse_in_header *in = buf;
  if (in->opcode == FUSE_INIT && (size_t)n >= sizeof(*in) + offsetof(struct fuse_init_in, flags) + sizeof(uint32_t)) {
    const struct fuse_init_in *init = (const void *)(in + 1);
    uint64_t flags = init->flags;
    if ((flags & FUSE_INIT_EXT) && (size_t)n >= sizeof(*in) + offsetof(struct fuse_init_in, flags2) + sizeof(uint32_t))
      flags |= (uint64_t)init->flags2 << 32;
    r->offered = (flags & OVER_IO_URING) != 0;
    r->passthrough_offered = (flags & PASSTHROUGH_FLAG) != 0;
    r->init_unique = in->unique;
    if (r->want && !r->offered) r->why = WHY_NOT_OFFERED;
  } else {
    __atomic_add_fetch(&r->dev_requests, 1, __ATOMIC_RELAXED);
  }
  return n;
}

ssize_t rings_writev(fuse_rings *r, int fd, struct iovec *iov, int count) {
  if (!r || count < 1 || iov[0].iov_len < sizeof(struct fuse_out_header)) return writev(fd, iov, count);
  uint64_t unique;
  memcpy(&unique, (const char *)iov[0].iov_base + offsetof(struct fuse_out_header, unique), sizeof(unique));
  if (unique != 0 && unique == r->init_unique) {
    ssize_t res = answer_init(r, fd, iov, count);
    if (r->init_answered) r->init_answered(r->init_arg);
    return res;
  }
  if (unique != 0) {
    ring_entry *e = held_take(r, unique);
    if (e) return answer_ring(e, iov, count);
  }
  return writev(fd, iov, count);
}

/* ---- the end ---------------------------------------------------------------------------------------- */

void rings_stop(fuse_rings *r) {
  if (!r) return;
  pthread_mutex_lock(&r->lock);
  r->stopping = 1;
  pthread_cond_broadcast(&r->changed);
  pthread_mutex_unlock(&r->lock);
  for (int i = 0; i < r->nqueues; i++) {
    ring_queue *q = &r->queues[i];
    if (!q->thread_made) continue;
    pthread_mutex_lock(&q->lock);
    if (!q->closed) {
      struct io_uring_sqe *sqe = sqe_locked(q);
      if (sqe) {
        io_uring_prep_nop(sqe);
        sqe->user_data = WAKE;
        submit_locked(q);
      }
    }
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->thread, NULL);
    q->thread_made = 0;
  }
}

void rings_free(fuse_rings *r) {
  if (!r) return;
  rings_stop(r);
  free_queues(r);
  pthread_cond_destroy(&r->changed);
  pthread_mutex_destroy(&r->lock);
  free(r);
}

void rings_counts_of(fuse_rings *r, rings_counts *out) {
  memset(out, 0, sizeof(*out));
  out->transport = "dev";
  if (!r) return;
  pthread_mutex_lock(&r->lock);
  int rings = r->prepared;
  out->transport = rings ? "uring" : "dev";
  out->why = rings ? NULL : r->why;
  out->queues = rings ? r->nqueues : 0;
  out->depth = r->depth;
  pthread_mutex_unlock(&r->lock);
  out->ring_requests = __atomic_load_n(&r->ring_requests, __ATOMIC_RELAXED);
  out->dev_requests = __atomic_load_n(&r->dev_requests, __ATOMIC_RELAXED);
}
