#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# restore's fallback when a mount fails after the daemon forked (here: a chunk cache directory that
# cannot be created): the tree is extracted by the restore process itself, complete when restore
# exits 0, and no daemon goes on writing it in the background. Before the fix the command exited
# with the mount's code (1, or 3 as if it were a miss) while the detached daemon extracted the
# tree behind the user's next step. Usage: restore_fallback_test.sh path/to/lazycache
set -euo pipefail
LC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
W=$(mktemp -d /tmp/lc-fallback.XXXXXX)
cleanup() {
  for m in $(awk -v w="$W" '$2 ~ "^"w {print $2}' /proc/mounts); do "$LC" unmount --lazy "$m" >/dev/null 2>&1 || umount -l "$m" || true; done
  rm -rf "$W"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || { echo "SKIP: FUSE not usable"; exit 77; }
export LAZYCACHE_RUN_DIR=$W/run LAZYCACHE_CONFIG='' LAZYCACHE_STORE=file://$W/store
mkdir -p "$W/src/sub"
for i in $(seq 1 300); do echo "file $i" > "$W/src/sub/f$i"; done
head -c 3000000 /dev/urandom > "$W/src/big.bin"
LAZYCACHE_CACHE_DIR=$W/chunks "$LC" save --key k "$W/src" > /dev/null
mv "$W/src" "$W/want"
touch "$W/not-a-dir"

for bad in "$W/not-a-dir/chunks" /proc/lazycache-no-such-dir; do   # ENOTDIR (exit 1), ENOENT (exit 3)
  rm -rf "$W/src"
  rc=0
  LAZYCACHE_CACHE_DIR=$bad "$LC" restore --key k "$W/src" > "$W/out" 2> "$W/err" || rc=$?
  [ $rc = 0 ] || { cat "$W/err" >&2; fail "restore exited $rc when the mount failed (cache dir $bad)"; }
  grep -q "extracting instead" "$W/err" || { cat "$W/err" >&2; fail "restore did not say it fell back"; }
  ! mountpoint -q "$W/src" || fail "$W/src is mounted"
  # Complete at exit, and still the same a moment later (nothing writes it in the background).
  diff -r "$W/want" "$W/src" > /dev/null || fail "the tree was not complete when restore exited (cache dir $bad)"
  n=$(find "$W/src" | wc -l)
  sleep 0.5
  [ "$(find "$W/src" | wc -l)" = "$n" ] || fail "something went on writing the tree after restore exited"
  grep -q '^cache-hit=true' "$W/out" || fail "no cache-hit=true output"
done

# A miss is still a miss: exit 0, and 3 with --fail-on-cache-miss, without extracting anything.
rc=0; LAZYCACHE_CACHE_DIR=$W/chunks "$LC" restore --key nope "$W/miss1" > /dev/null 2>&1 || rc=$?
[ $rc = 0 ] || fail "a miss exited $rc"
rc=0; LAZYCACHE_CACHE_DIR=$W/chunks "$LC" restore --fail-on-cache-miss --key nope "$W/miss2" > /dev/null 2>&1 || rc=$?
[ $rc = 3 ] || fail "a miss with --fail-on-cache-miss exited $rc, expected 3"
echo ok
