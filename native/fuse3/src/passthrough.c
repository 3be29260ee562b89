/*
 * Backing files: FUSE passthrough, registered with the kernel and carried by the answers to opens and creates.
 */
#include "engine_i.h"

/*
 * ---- Passthrough ----
 * With passthrough granted at INIT (Linux 6.9 and later, and CAP_SYS_ADMIN for the backing files), an
 * open or create may be answered with a backing file: a local file the kernel then reads and writes
 * itself for that handle, no request reaching the engine. The engine registers the file
 * (FUSE_DEV_IOC_BACKING_OPEN, backingOpen) and JavaScript keeps the id it gets while any handle of the
 * inode is open with it (the kernel takes one backing file an inode); backingClose lets it go. libfuse
 * 3.14 knows none of it: the ioctls and the answers' fields are written here.
 */


typedef struct {
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
} backing_map;

#define DEV_IOC_BACKING_OPEN _IOW(229, 1, backing_map)
#define DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

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
int backing_open(session *s, int fd) {
  if (!rings_passthrough(s->rings)) return -EOPNOTSUPP;
  backing_map map;
  memset(&map, 0, sizeof(map));
  map.fd = fd;
  int res = ioctl(fuse_session_fd(s->se), DEV_IOC_BACKING_OPEN, &map);
  if (res < 0) return -errno;
  return res == 0 ? -EIO : res; /* ids start at 1 */
}

/* Lets the backing file `id` go (handles opened with it keep it): 0, or -errno. */
int backing_close(session *s, int id) {
  uint32_t v = (uint32_t)id;
  return ioctl(fuse_session_fd(s->se), DEV_IOC_BACKING_CLOSE, &v) < 0 ? -errno : 0;
}

/* Answers a create with the backing file `backing` (fuse_reply_create's answer, with the open's passthrough fields). */
int reply_create_backing(fuse_req_t req, const struct fuse_entry_param *e, uint64_t fh, int backing) {
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
