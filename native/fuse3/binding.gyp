{
  "variables": {
    "engine_sources": [
      "src/session.c", "src/lowlevel.c", "src/queue.c", "src/attr_cache.c", "src/folder_names.c",
      "src/created.c", "src/side_log.c", "src/close_record.c", "src/spool_writer.c", "src/spool_pool.c", "src/passthrough.c",
      "src/js_args.c", "src/js_replies.c", "src/notify.c", "src/js_calls.c", "src/rings.c"
    ]
  },
  "target_defaults": {
    "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-std=gnu11", "-fvisibility=hidden"],
    "include_dirs": ["<!@(pkg-config --cflags-only-I fuse3 | sed 's/-I//g')"],
    "libraries": ["<!@(pkg-config --libs fuse3)", "-lcrypto", "-luring"],
    "defines": ["NAPI_VERSION=8", "FUSE_USE_VERSION=312"]
  },
  "targets": [
    {
      "target_name": "fuse3",
      "sources": ["<@(engine_sources)"]
    },
    {
      "target_name": "fuse3_bench",
      "sources": ["<@(engine_sources)", "src/null_fs.c"],
      "defines": ["CLOUDLIB_NULL_FILES"]
    }
  ]
}
