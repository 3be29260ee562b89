{
  "targets": [
    {
      "target_name": "fuse3",
      "sources": ["src/session.c", "src/rings.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-std=gnu11"],
      "include_dirs": ["<!@(pkg-config --cflags-only-I fuse3 | sed 's/-I//g')"],
      "libraries": ["<!@(pkg-config --libs fuse3)", "-lcrypto", "-luring"],
      "defines": ["NAPI_VERSION=8", "FUSE_USE_VERSION=312"]
    }
  ]
}
