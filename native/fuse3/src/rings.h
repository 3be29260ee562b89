/*
 * FUSE over io_uring (kernel 6.14 and later) under libfuse 3's low-level session: see rings.c.
 */
#ifndef CLOUDLIB_RINGS_H
#define CLOUDLIB_RINGS_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct fuse_session;
typedef struct fuse_rings fuse_rings;

typedef struct rings_counts {
  /* "uring" when the session's requests come from its rings (from INIT on), "dev" when from /dev/fuse. */
  const char *transport;
  /* Why the session is on /dev/fuse (NULL when it is not). */
  const char *why;
  /* Requests that came from the rings, and from /dev/fuse. */
  uint64_t ring_requests, dev_requests;
  int queues, depth;
} rings_counts;

/*
 * The rings of one mounted session whose descriptor is `fd`: its reads and answers must go through
 * rings_read and rings_writev (fuse_session_custom_io). `want`: 0 never (every request from /dev/fuse),
 * 1 when the kernel offers them. `depth`: request buffers a queue registers.
 */
fuse_rings *rings_new(struct fuse_session *se, int fd, int want, int depth);
/* From the init callback, before INIT is answered: makes the rings when the kernel offered them. */
void rings_prepare(fuse_rings *r, unsigned max_write);
/* The session's custom I/O. */
ssize_t rings_read(fuse_rings *r, int fd, void *buf, size_t len);
ssize_t rings_writev(fuse_rings *r, int fd, struct iovec *iov, int count);
/* The connection is gone (the /dev/fuse readers ended): stops the rings' threads and waits for them. */
void rings_stop(fuse_rings *r);
/* After rings_stop: frees everything. */
void rings_free(fuse_rings *r);
void rings_counts_of(fuse_rings *r, rings_counts *out);
/*
 * FUSE passthrough, negotiated at INIT by the same answer: offered by the kernel (known in the init
 * callback), asked for from the init callback (the session then asks for no writeback cache: the kernel
 * grants passthrough only without it), and granted once the kernel took the answer.
 */
int rings_passthrough_offered(fuse_rings *r);
void rings_ask_passthrough(fuse_rings *r);
int rings_passthrough(fuse_rings *r);
/* `fn(arg)` is called once the kernel has taken the answer to INIT (its settings, the read-ahead window among them, in force). */
void rings_on_init_answered(fuse_rings *r, void (*fn)(void *), void *arg);

#endif
