# SPDX-License-Identifier: MIT
# Sourced by the writable CLI tests: `cli_test_setup LAZYCACHE NAME` makes a private work dir $W
# (run dir, chunk cache and local-directory store inside it), the mount point $P, an EXIT trap
# that unmounts $P and removes $W, fail(), listing(); it exits 0 with SKIP when /dev/fuse
# cannot be opened.
cli_test_setup() {
  LC=$1
  W=$(mktemp -d "/tmp/$2.XXXXXX")
  export LAZYCACHE_RUN_DIR=$W/run LAZYCACHE_CACHE_DIR=$W/cache/chunks LAZYCACHE_STORE=$W/store
  # Incremental saves also scan the mount and fail if the tree they built differs (tools/incremental_save.h).
  export LAZYCACHE_SAVE_CROSSCHECK=1
  P=$W/ws/deps
  trap cli_test_cleanup EXIT
  if ! { exec 9<>/dev/fuse; } 2>/dev/null; then echo "SKIP: /dev/fuse cannot be opened"; exit 0; fi
  exec 9>&-
}
cli_test_cleanup() {
  if mountpoint -q "$P" 2>/dev/null; then "$LC" unmount --lazy "$P" >/dev/null 2>&1 || fusermount3 -u -z "$P" || true; fi
  rm -rf "$W"
}
fail() { echo "FAIL: $*" >&2; exit 1; }
# type, mode, size, links of files, symlink targets and file content: what a restore must keep
# (git's index and logs hold stat data and the clock, so they are left out).
listing() { (cd "$1" && find . -mindepth 1 \( -type d -printf '%y %m %p\n' \) -o \( -printf '%y %m %s %n %p %l\n' \) | LC_ALL=C sort
             cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r md5sum | grep -v -e '/.git/index$' -e '/.git/logs/'); }
# The version an entry saved for PATH... is named with (remote/cache_keys.h: 16 hex digits of
# SHA-256 over "lazycache-paths-v1", each path and "zstd-seekable", joined by NUL bytes).
paths_version() { { printf 'lazycache-paths-v1'; printf '\0%s' "$@"; printf '\0zstd-seekable'; } | sha256sum | cut -c1-16; }
# The file of KEY's entry saved for PATH... (default $P) in the local store $W/store.
entry_file() { local key=$1; shift; [ $# -gt 0 ] || set -- "$P"; echo "$W/store/$key!$(paths_version "$@").tar.zst"; }
