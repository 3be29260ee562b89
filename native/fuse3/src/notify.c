/*
 * What the kernel is told to forget: a name it cached (invalidateEntry), what it cached of a file or folder
 * (invalidateInode: attributes, pages, a folder's listing) and a name removed elsewhere (notifyDelete,
 * which also tells inotify watchers of the folder). Each also drops what the engine itself keeps of it
 * (the attribute cache, the names of folders) at once, on the main thread, so that nothing the engine
 * answers after the call returns predates it.
 *
 * The kernel's part runs on a thread of libuv's pool, never on a reader thread nor with a lock of the
 * session held: libfuse's notify functions write to the device and the kernel handles them there and
 * then, taking the folder's or the file's lock, which a request under way on that folder or file holds
 * until it is answered (by JavaScript, on the main thread, or by a reader thread).
 */
#include "engine_i.h"

enum notify_kind { NOTIFY_ENTRY = 1, NOTIFY_INODE = 2, NOTIFY_DELETE = 3 };

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  session *s;
  int kind;
  fuse_ino_t parent;
  fuse_ino_t child;
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
  switch (job->kind) {
  case NOTIFY_ENTRY:
    job->rc = fuse_lowlevel_notify_inval_entry(s->se, job->parent, job->name, strlen(job->name));
    break;
  case NOTIFY_INODE:
    /* Offset 0, length 0: the attributes and every cached page (a folder: its cached listing). */
    job->rc = fuse_lowlevel_notify_inval_inode(s->se, job->child, 0, 0);
    break;
  default:
    job->rc = fuse_lowlevel_notify_delete(s->se, job->parent, job->child, job->name, strlen(job->name));
    break;
  }
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

/* Queues `job` on libuv's pool: a promise of libfuse's answer (0, or a negative errno such as -ENOENT). */
static napi_value notify_queue(napi_env env, notify_job *job) {
  napi_value promise, name;
  if (napi_create_promise(env, &job->deferred, &promise) != napi_ok) {
    free(job->name);
    free(job);
    napi_throw_error(env, NULL, "cannot create a promise");
    return NULL;
  }
  napi_create_string_utf8(env, "fuse3-notify", NAPI_AUTO_LENGTH, &name);
  if (napi_create_async_work(env, NULL, name, notify_execute, notify_complete, job, &job->work) != napi_ok || napi_queue_async_work(env, job->work) != napi_ok) {
    /* The promise stays pending: answer it here. */
    napi_value err;
    napi_create_string_utf8(env, "cannot queue the notification", NAPI_AUTO_LENGTH, &err);
    napi_reject_deferred(env, job->deferred, err);
    free(job->name);
    free(job);
  }
  return promise;
}

/* The arguments of the three calls: (session, ino, ino2?, name?), checked; NULL (thrown) when wrong. */
static notify_job *notify_args(napi_env env, napi_callback_info info, int kind, const char *usage) {
  size_t want = kind == NOTIFY_ENTRY ? 3 : kind == NOTIFY_INODE ? 2 : 4;
  size_t argc = 4;
  napi_value argv[4];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < want) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  double a = get_double(env, argv[1]);
  double b = kind == NOTIFY_DELETE ? get_double(env, argv[2]) : 0;
  if (!(a >= 1) || (kind == NOTIFY_DELETE && !(b >= 1))) {
    napi_throw_range_error(env, NULL, usage);
    return NULL;
  }
  char *name = NULL;
  if (kind != NOTIFY_INODE) {
    name = get_string(env, argv[kind == NOTIFY_ENTRY ? 2 : 3]);
    if (!name || name[0] == '\0' || strchr(name, '/')) {
      free(name);
      napi_throw_type_error(env, NULL, usage);
      return NULL;
    }
  }
  notify_job *job = calloc(1, sizeof(notify_job));
  if (!job) {
    free(name);
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  job->s = s;
  job->kind = kind;
  job->name = name;
  if (kind == NOTIFY_INODE) job->child = (fuse_ino_t)a;
  else job->parent = (fuse_ino_t)a;
  if (kind == NOTIFY_DELETE) job->child = (fuse_ino_t)b;
  return job;
}

/*
 * invalidateEntry(session, parentIno, name) → Promise<rc>: the kernel forgets a name it cached, so the
 * next path walk looks it up again. The engine keeps the folder's names: JavaScript tells it of its own
 * changes, and a name made elsewhere comes with invalidateInode of the folder, which forgets them (else
 * every rename through the mount would stop the engine answering creates in its folder).
 */
napi_value js_invalidate_entry(napi_env env, napi_callback_info info) {
  notify_job *job = notify_args(env, info, NOTIFY_ENTRY, "invalidateEntry(session, parentIno >= 1, name)");
  if (!job) return NULL;
  return notify_queue(env, job);
}

/*
 * invalidateInode(session, ino) → Promise<rc>: the kernel forgets the attributes and cached pages of a
 * file (a folder: its attributes and listing) changed elsewhere; so does the engine (its attributes, and a
 * folder's names).
 */
napi_value js_invalidate_inode(napi_env env, napi_callback_info info) {
  notify_job *job = notify_args(env, info, NOTIFY_INODE, "invalidateInode(session, ino >= 1)");
  if (!job) return NULL;
  attr_forget(job->s, job->child);
  names_forget(job->s, job->child);
  return notify_queue(env, job);
}

/*
 * notifyDelete(session, parentIno, childIno, name) → Promise<rc>: `name` in the folder, the inode
 * `childIno`, was removed elsewhere. The kernel drops the name (when it still leads to that inode) and
 * tells inotify watchers as for a delete made through the mount; -ENOENT when it no longer held the name
 * (nothing to tell), -ENOTEMPTY for a folder whose cached names are not all gone. The engine forgets the
 * child's attributes.
 */
napi_value js_notify_delete(napi_env env, napi_callback_info info) {
  notify_job *job = notify_args(env, info, NOTIFY_DELETE, "notifyDelete(session, parentIno >= 1, childIno >= 1, name)");
  if (!job) return NULL;
  attr_forget(job->s, job->child);
  return notify_queue(env, job);
}
