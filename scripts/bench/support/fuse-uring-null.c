/*
 * The ceiling of small files through FUSE over its two kernel transports, measured side by side: a null
 * file system (names, folders and sizes in memory, nothing stored) whose requests come either from
 * /dev/fuse (read, answered with writev: the transport of libfuse 3.14 and so of the engine) or from
 * FUSE over io_uring (kernel 6.14 and later, module parameter fuse.enable_uring: each CPU has a ring of
 * request buffers registered with the kernel; a request arrives as a completion, its answer goes back
 * with the command that fetches the next one). The same handlers answer both. Built and run by the FUSE
 * benchmark (as root: it mounts with mount(2)).
 *
 * usage: fuse-uring-null MOUNTPOINT dev|uring
 * Prints `mounted`, serves until the mount goes (fusermount -u), then prints
 * `requests dev=N ring=M` (how many requests each transport carried) and exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* The io_uring part of the protocol (7.42), missing from older kernel headers. */
#define OVER_IO_URING (1ULL << 41)
#define URING_HEADER_SZ 128
struct ring_ent_in_out {
  uint64_t flags, commit_id;
  uint32_t payload_sz, padding;
  uint64_t reserved;
};
struct ring_req_header {
  char in_out[URING_HEADER_SZ]; /* fuse_in_header on arrival, fuse_out_header in the answer */
  char op_in[URING_HEADER_SZ];  /* the request's own fixed argument (fuse_write_in, ...) */
  struct ring_ent_in_out ent;
};
struct ring_cmd {
  uint64_t flags, commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
enum { RING_REGISTER = 1, RING_COMMIT_AND_FETCH = 2 };

#define MAX_WRITE (1024 * 1024)
#define PAYLOAD_SZ (MAX_WRITE + 4096)
#define RING_DEPTH 16
#define ANSWER_MAX 512

typedef struct node {
  uint64_t ino, parent, size;
  uint32_t mode;
  char *name;
} node;

static node **nodes;
static uint64_t node_count, node_cap;
static pthread_mutex_t nodes_lock = PTHREAD_MUTEX_INITIALIZER;
static int fuse_fd;
static int want_ring;
static uint64_t via_dev, via_ring;

static node *node_add(uint64_t parent, const char *name, uint32_t mode) {
  if (node_count == node_cap) {
    node_cap = node_cap ? node_cap * 2 : 1024;
    nodes = realloc(nodes, node_cap * sizeof(node *));
  }
  node *n = calloc(1, sizeof(node));
  n->ino = node_count + 1;
  n->parent = parent;
  n->mode = mode;
  n->name = strdup(name);
  nodes[node_count++] = n;
  return n;
}

static node *node_get(uint64_t ino) {
  return ino >= 1 && ino <= node_count ? nodes[ino - 1] : NULL;
}

static node *node_find(uint64_t parent, const char *name) {
  for (uint64_t i = node_count; i-- > 0;)
    if (nodes[i]->parent == parent && strcmp(nodes[i]->name, name) == 0) return nodes[i];
  return NULL;
}

static void attr_of(const node *n, struct fuse_attr *a) {
  memset(a, 0, sizeof(*a));
  a->ino = n->ino;
  a->size = n->size;
  a->blocks = (n->size + 511) / 512;
  a->mode = n->mode;
  a->nlink = S_ISDIR(n->mode) ? 2 : 1;
  a->blksize = 4096;
}

static int entry_of(const node *n, char *out) {
  struct fuse_entry_out *e = (void *)out;
  memset(e, 0, sizeof(*e));
  e->nodeid = n->ino;
  e->generation = 1;
  e->entry_valid = e->attr_valid = 2;
  attr_of(n, &e->attr);
  return sizeof(*e);
}

static int attr_answer(const node *n, char *out) {
  struct fuse_attr_out *a = (void *)out;
  memset(a, 0, sizeof(*a));
  a->attr_valid = 2;
  attr_of(n, &a->attr);
  return sizeof(*a);
}

/* Size of the fixed argument each handled request starts with (the name or data follows it). */
static size_t fixed_arg_size(uint32_t opcode) {
  switch (opcode) {
    case FUSE_SETATTR: return sizeof(struct fuse_setattr_in);
    case FUSE_MKDIR: return sizeof(struct fuse_mkdir_in);
    case FUSE_CREATE: return sizeof(struct fuse_create_in);
    case FUSE_WRITE: return sizeof(struct fuse_write_in);
    case FUSE_GETATTR: return sizeof(struct fuse_getattr_in);
    default: return 0;
  }
}

/*
 * Answers one request: `arg` is its fixed argument, `tail` the name that follows it. Writes the answer's
 * arguments into `out` and returns their size, or -errno; *silent for a request that gets no answer.
 */
static int serve(const struct fuse_in_header *in, const void *arg, const char *tail, char *out, int *silent) {
  *silent = 0;
  int r = -ENOSYS;
  pthread_mutex_lock(&nodes_lock);
  node *n = node_get(in->nodeid);
  switch (in->opcode) {
    case FUSE_LOOKUP: {
      node *c = node_find(in->nodeid, tail);
      r = c ? entry_of(c, out) : -ENOENT;
      break;
    }
    case FUSE_FORGET: case FUSE_BATCH_FORGET:
      *silent = 1;
      r = 0;
      break;
    case FUSE_GETATTR:
      r = n ? attr_answer(n, out) : -ENOENT;
      break;
    case FUSE_SETATTR: {
      const struct fuse_setattr_in *s = arg;
      if (!n) { r = -ENOENT; break; }
      if (s->valid & FATTR_SIZE) n->size = s->size;
      if (s->valid & FATTR_MODE) n->mode = (n->mode & S_IFMT) | (s->mode & 07777);
      r = attr_answer(n, out);
      break;
    }
    case FUSE_MKDIR: {
      const struct fuse_mkdir_in *m = arg;
      r = node_find(in->nodeid, tail) ? -EEXIST : entry_of(node_add(in->nodeid, tail, S_IFDIR | (m->mode & 07777)), out);
      break;
    }
    case FUSE_CREATE: {
      const struct fuse_create_in *c = arg;
      node *f = node_find(in->nodeid, tail);
      if (f && (c->flags & O_EXCL)) { r = -EEXIST; break; }
      if (!f) f = node_add(in->nodeid, tail, S_IFREG | (c->mode & 07777));
      r = entry_of(f, out);
      struct fuse_open_out *o = (void *)(out + r);
      memset(o, 0, sizeof(*o));
      o->fh = f->ino;
      r += sizeof(*o);
      break;
    }
    case FUSE_OPEN: case FUSE_OPENDIR: {
      struct fuse_open_out *o = (void *)out;
      memset(o, 0, sizeof(*o));
      o->fh = in->nodeid;
      r = sizeof(*o);
      break;
    }
    case FUSE_WRITE: {
      const struct fuse_write_in *w = arg;
      if (n && w->offset + w->size > n->size) n->size = w->offset + w->size;
      struct fuse_write_out *o = (void *)out;
      memset(o, 0, sizeof(*o));
      o->size = w->size;
      r = sizeof(*o);
      break;
    }
    case FUSE_FLUSH: case FUSE_RELEASE: case FUSE_RELEASEDIR: case FUSE_FSYNC: case FUSE_FSYNCDIR: case FUSE_ACCESS:
      r = 0;
      break;
    case FUSE_READDIR:
      r = 0; /* empty: nothing here reads folders back */
      break;
    case FUSE_GETXATTR: case FUSE_LISTXATTR:
      r = -EOPNOTSUPP;
      break;
    case FUSE_STATFS: {
      struct fuse_statfs_out *o = (void *)out;
      memset(o, 0, sizeof(*o));
      o->st.bsize = o->st.frsize = 4096;
      o->st.namelen = 255;
      o->st.blocks = 1 << 20;
      o->st.bfree = o->st.bavail = 1 << 19;
      r = sizeof(*o);
      break;
    }
  }
  pthread_mutex_unlock(&nodes_lock);
  return r;
}

static void answer_dev(uint64_t unique, int r, const char *out) {
  struct fuse_out_header oh = { .len = sizeof(oh) + (r > 0 ? (uint32_t)r : 0), .error = r < 0 ? r : 0, .unique = unique };
  struct iovec iov[2] = { { &oh, sizeof(oh) }, { (void *)out, r > 0 ? (size_t)r : 0 } };
  if (writev(fuse_fd, iov, r > 0 ? 2 : 1) < 0 && errno != ENOENT) perror("writev");
}

/* INIT: the engine's settings (1 MiB writes, the writeback cache), and the rings when asked for and offered. */
static void answer_init(const struct fuse_in_header *in, const struct fuse_init_in *init) {
  uint64_t offered = init->flags | ((uint64_t)init->flags2 << 32);
  uint64_t wanted = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_WRITEBACK_CACHE | FUSE_PARALLEL_DIROPS | FUSE_MAX_PAGES | FUSE_ATOMIC_O_TRUNC;
  if (want_ring) wanted |= OVER_IO_URING;
  wanted = (wanted & offered) | FUSE_INIT_EXT;
  struct fuse_init_out o;
  memset(&o, 0, sizeof(o));
  o.major = FUSE_KERNEL_VERSION;
  o.minor = 42;
  o.max_readahead = init->max_readahead;
  o.max_background = 64;
  o.congestion_threshold = 48;
  o.max_write = MAX_WRITE;
  o.time_gran = 1;
  o.max_pages = MAX_WRITE / 4096;
  o.flags = (uint32_t)wanted;
  o.flags2 = (uint32_t)(wanted >> 32);
  if (want_ring && !(offered & OVER_IO_URING)) fprintf(stderr, "fuse-uring-null: the kernel offers no io_uring (fuse.enable_uring is off)\n");
  answer_dev(in->unique, sizeof(o), (const char *)&o);
}

/* Requests from /dev/fuse: all of them without rings; with rings, those before they are ready and forgets. */
static void *dev_reader(void *unused) {
  (void)unused;
  char *buf = malloc(PAYLOAD_SZ + 4096);
  char out[ANSWER_MAX];
  for (;;) {
    ssize_t got = read(fuse_fd, buf, PAYLOAD_SZ + 4096);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      break; /* ENODEV: unmounted */
    }
    const struct fuse_in_header *in = (const void *)buf;
    if (in->opcode == FUSE_INIT) {
      answer_init(in, (const void *)(in + 1));
      continue;
    }
    if (in->opcode == FUSE_DESTROY) break;
    __atomic_add_fetch(&via_dev, 1, __ATOMIC_RELAXED);
    const char *arg = (const char *)(in + 1);
    int silent;
    int r = serve(in, arg, arg + fixed_arg_size(in->opcode), out, &silent);
    if (!silent) answer_dev(in->unique, r, out);
  }
  free(buf);
  return NULL;
}

/* A ring of 128-byte SQEs (SQE128): the command area is the second half, past what the type declares. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
static void ring_command(struct io_uring *ring, struct iovec *iov, int entry, int cmd, uint16_t qid, uint64_t commit_id) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
  memset(sqe, 0, 128);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fuse_fd;
  sqe->cmd_op = cmd;
  sqe->addr = (uint64_t)(uintptr_t)iov;
  sqe->len = 2;
  sqe->user_data = (uint64_t)entry;
  struct ring_cmd *c = (void *)sqe->cmd;
  c->qid = qid;
  c->commit_id = commit_id;
}
#pragma GCC diagnostic pop

/* One queue: RING_DEPTH request buffers registered with the kernel, served on a thread kept on CPU `qid`. */
static void *ring_queue(void *arg) {
  uint16_t qid = (uint16_t)(uintptr_t)arg;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(qid, &cpus);
  pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
  struct io_uring ring;
  int err = io_uring_queue_init(2 * RING_DEPTH, &ring, IORING_SETUP_SQE128);
  if (err) {
    fprintf(stderr, "fuse-uring-null: io_uring_queue_init: %s\n", strerror(-err));
    return NULL;
  }
  struct ring_req_header *header[RING_DEPTH];
  char *payload[RING_DEPTH];
  struct iovec iov[RING_DEPTH][2];
  for (int i = 0; i < RING_DEPTH; i++) {
    header[i] = aligned_alloc(4096, 4096);
    payload[i] = aligned_alloc(4096, PAYLOAD_SZ);
    memset(header[i], 0, 4096);
    iov[i][0] = (struct iovec){ header[i], sizeof(struct ring_req_header) };
    iov[i][1] = (struct iovec){ payload[i], PAYLOAD_SZ };
    ring_command(&ring, iov[i], i, RING_REGISTER, qid, 0);
  }
  if ((err = io_uring_submit(&ring)) < 0) {
    fprintf(stderr, "fuse-uring-null: registering queue %u: %s\n", qid, strerror(-err));
    return NULL;
  }
  char out[ANSWER_MAX];
  for (;;) {
    struct io_uring_cqe *cqe;
    err = io_uring_wait_cqe(&ring, &cqe);
    if (err == -EINTR) continue;
    if (err) break;
    int i = (int)cqe->user_data;
    int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    if (res < 0) break; /* the connection is gone */
    __atomic_add_fetch(&via_ring, 1, __ATOMIC_RELAXED);
    struct ring_req_header *h = header[i];
    struct fuse_in_header in = *(struct fuse_in_header *)h->in_out;
    uint64_t commit_id = h->ent.commit_id;
    int silent;
    int r = serve(&in, h->op_in, payload[i], out, &silent);
    struct fuse_out_header *oh = (void *)h->in_out;
    memset(oh, 0, sizeof(*oh));
    oh->len = sizeof(*oh) + (r > 0 ? (uint32_t)r : 0);
    oh->error = r < 0 ? r : 0;
    oh->unique = in.unique;
    if (r > 0) memcpy(payload[i], out, (size_t)r);
    h->ent.payload_sz = r > 0 ? (uint32_t)r : 0;
    ring_command(&ring, iov[i], i, RING_COMMIT_AND_FETCH, qid, commit_id);
    io_uring_submit(&ring);
  }
  io_uring_queue_exit(&ring);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[2], "dev") != 0 && strcmp(argv[2], "uring") != 0)) {
    fprintf(stderr, "usage: fuse-uring-null MOUNTPOINT dev|uring\n");
    return 2;
  }
  want_ring = strcmp(argv[2], "uring") == 0;
  node_add(0, "", S_IFDIR | 0755); /* inode 1, the root */
  fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fuse_fd < 0) {
    perror("fuse-uring-null: /dev/fuse");
    return 1;
  }
  char options[128];
  snprintf(options, sizeof(options), "fd=%d,rootmode=40000,user_id=0,group_id=0,default_permissions", fuse_fd);
  if (mount("cloudlib-null", argv[1], "fuse.cloudlib-null", MS_NOSUID | MS_NODEV, options) != 0) {
    perror("fuse-uring-null: mount");
    return 1;
  }
  pthread_t dev;
  pthread_create(&dev, NULL, dev_reader, NULL);
  if (want_ring) {
    /* Every CPU's queue must be registered before the kernel routes requests to the rings (after INIT). */
    usleep(100000);
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    for (long q = 0; q < cpus; q++) {
      pthread_t t;
      pthread_create(&t, NULL, ring_queue, (void *)(uintptr_t)q);
      pthread_detach(t);
    }
  }
  printf("mounted\n");
  fflush(stdout);
  pthread_join(dev, NULL);
  printf("requests dev=%llu ring=%llu\n", (unsigned long long)via_dev, (unsigned long long)via_ring);
  fflush(stdout);
  return 0;
}
