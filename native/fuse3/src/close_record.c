/*
 * The engine's close record: what the engine writes to its log (journalSwitch) before it answers a close
 * itself, so that a crash after the answer loses nothing. The engine writes only this format; the upload
 * journal reads it with its one codec (src/vfs/engine-close-record.ts) and writes lines of its own from
 * it. Golden records both sides are tested against: test/fixtures/engine-close-records/.
 *
 * Format, version 1. Integers little-endian; lengths in bytes.
 *
 *   offset  size  field
 *   0       4     magic: 'E' 'C' 'R' and the format's version (0x01)
 *   4       1     kind: 1 = an answered close (the whole content of a new file)
 *   5       1     0
 *   6       2     L: the library's name length
 *   8       2     P: the path's length
 *   10      2     0
 *   12      4     D: the content's length (the file's size; at most 64 KiB)
 *   16      16    the journal id of the file's version: 16 lowercase hex digits (ASCII)
 *   32      8     the file's modification time, ns since the epoch (signed)
 *   40      8     when the record was made, ms since the epoch
 *   48      8     seq: the order of acknowledgement (µs, as the journal draws them)
 *   56      20    SHA-1 of the content
 *   76      L     the library's name (UTF-8)
 *   76+L    P     the library-relative path (UTF-8)
 *   76+L+P  D     the content
 *   then    8     check: the first 8 bytes of the SHA-1 of every byte above, from the magic on
 *
 * A record that does not match its check (a crash cut it short, or the disk refused part of it) is
 * ignored by the reader, which goes on at the next magic whose record matches its check.
 */
#include "engine_i.h"

static void put_u16(unsigned char *p, uint16_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The record of `f` (malloc'd, its length in `len`); NULL when a field does not fit or memory ran out. */
unsigned char *close_record_encode(const close_record_fields *f, size_t *len) {
  size_t lib = strlen(f->library), path = strlen(f->fullpath);
  if (lib > 0xffff || path > 0xffff || f->size > CLOSE_RECORD_CONTENT_MAX || strlen(f->id) != 16) return NULL;
  size_t total = CLOSE_RECORD_HEAD + lib + path + f->size + CLOSE_RECORD_CHECK;
  unsigned char *r = calloc(1, total);
  if (!r) return NULL;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  if (EVP_Digest(f->data ? f->data : "", f->size, md, &md_len, sha1_md(), NULL) != 1 || md_len != 20) {
    free(r);
    return NULL;
  }
  memcpy(r, "ECR\x01", 4);
  r[4] = CLOSE_RECORD_KIND_CLOSE;
  put_u16(r + 6, (uint16_t)lib);
  put_u16(r + 8, (uint16_t)path);
  put_u32(r + 12, (uint32_t)f->size);
  memcpy(r + 16, f->id, 16);
  put_u64(r + 32, (uint64_t)f->mtime_ns);
  put_u64(r + 40, f->created_ms);
  put_u64(r + 48, f->seq);
  memcpy(r + 56, md, 20);
  size_t at = CLOSE_RECORD_HEAD;
  memcpy(r + at, f->library, lib);
  at += lib;
  memcpy(r + at, f->fullpath, path);
  at += path;
  if (f->size) memcpy(r + at, f->data, f->size);
  at += f->size;
  if (EVP_Digest(r, at, md, &md_len, sha1_md(), NULL) != 1) {
    free(r);
    return NULL;
  }
  memcpy(r + at, md, CLOSE_RECORD_CHECK);
  *len = total;
  return r;
}

/*
 * encodeCloseRecord({ id, library, fullpath, mtimeNs, createdMs, seq, data }) → Buffer: the record the
 * engine writes for these fields (for the tests shared with the journal's codec). Throws on a field that
 * does not fit the format.
 */
napi_value js_encode_close_record(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  const char *usage = "encodeCloseRecord({ id, library, fullpath, mtimeNs, createdMs, seq, data })";
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  napi_value id_v, lib_v, path_v, mtime_v, created_v, seq_v, data_v;
  if (napi_get_named_property(env, argv[0], "id", &id_v) != napi_ok || napi_get_named_property(env, argv[0], "library", &lib_v) != napi_ok ||
      napi_get_named_property(env, argv[0], "fullpath", &path_v) != napi_ok || napi_get_named_property(env, argv[0], "mtimeNs", &mtime_v) != napi_ok ||
      napi_get_named_property(env, argv[0], "createdMs", &created_v) != napi_ok || napi_get_named_property(env, argv[0], "seq", &seq_v) != napi_ok ||
      napi_get_named_property(env, argv[0], "data", &data_v) != napi_ok) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  close_record_fields f;
  memset(&f, 0, sizeof(f));
  char *id = get_string(env, id_v), *library = get_string(env, lib_v), *fullpath = get_string(env, path_v);
  int64_t mtime = 0;
  bool lossless = false;
  void *data = NULL;
  size_t size = 0;
  bool is_buffer = false;
  napi_is_buffer(env, data_v, &is_buffer);
  int ok = id && library && fullpath && is_buffer && napi_get_value_bigint_int64(env, mtime_v, &mtime, &lossless) == napi_ok && lossless &&
    napi_get_buffer_info(env, data_v, &data, &size) == napi_ok;
  unsigned char *r = NULL;
  size_t len = 0;
  if (ok) {
    snprintf(f.id, sizeof(f.id), "%s", id);
    f.library = library;
    f.fullpath = fullpath;
    f.mtime_ns = mtime;
    f.created_ms = (uint64_t)get_double(env, created_v);
    f.seq = (uint64_t)get_double(env, seq_v);
    f.data = data;
    f.size = size;
    r = strlen(id) == 16 ? close_record_encode(&f, &len) : NULL;
  }
  free(id);
  free(library);
  free(fullpath);
  if (!r) {
    napi_throw_range_error(env, NULL, ok ? "encodeCloseRecord: a field does not fit the record" : usage);
    return NULL;
  }
  napi_value buf;
  napi_status st = napi_create_buffer_copy(env, len, r, NULL, &buf);
  free(r);
  if (st != napi_ok) {
    napi_throw_error(env, NULL, "encodeCloseRecord: out of memory");
    return NULL;
  }
  return buf;
}
