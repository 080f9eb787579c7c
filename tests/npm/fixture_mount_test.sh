#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/npm/fixture_mount_test.sh LAZYCACHE MAKE_FIXTURE WORK
# The bench's node_modules fixture (bench/make-fixture-node.sh: ~29k files from a committed lock)
# saved to a local-directory store and mounted: every file reads back byte-identical, and types,
# modes, sizes, link counts, symlink targets and mtimes match the source; `find` lists the same.
# Skipped (exit 0, with a message) without npm or /dev/fuse. The fixture stays in WORK/fixture.
set -euo pipefail
LC=$1; MAKE_FIXTURE=$2; WORK=$3
if ! command -v npm >/dev/null; then echo "SKIP: npm is missing (apt-get install npm): the node fixture cannot be built"; exit 0; fi
if ! { exec 9<>/dev/fuse; } 2>/dev/null; then echo "SKIP: /dev/fuse cannot be opened"; exit 0; fi
exec 9>&-
mkdir -p "$WORK"
"$MAKE_FIXTURE" "$WORK/fixture"
W=$(mktemp -d /tmp/lc-npm-fixture.XXXXXX)
export LAZYCACHE_RUN_DIR=$W/run LAZYCACHE_CACHE_DIR=$W/chunks LAZYCACHE_STORE=$W/store
M=$W/mnt
cleanup() {
  if mountpoint -q "$M" 2>/dev/null; then "$LC" unmount --lazy "$M" >/dev/null 2>&1 || fusermount3 -u -z "$M" || true; fi
  rm -rf "$W"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
SRC=$WORK/fixture/node_modules
describe() { (cd "$1" && find . -printf '%y %m %n %s %T@ %p %l\n' | awk '$1 == "d" { $4 = "-" } 1' | LC_ALL=C sort
              find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r md5sum); }

"$LC" save --key node-fixture "$SRC" > "$W/save.out" || { cat "$W/save.out"; fail "save"; }
mkdir -p "$M"
"$LC" mount --any-paths --key node-fixture --read-only --prefetch none "$M" > "$W/mount.out" || { cat "$W/mount.out"; fail "mount"; }
mountpoint -q "$M" || fail "not mounted: $(cat "$W/mount.out")"
describe "$SRC" > "$W/want"
describe "$M" > "$W/got"
if ! cmp -s "$W/want" "$W/got"; then diff "$W/want" "$W/got" | head -20; fail "the mounted fixture differs from the source"; fi
files=$(find "$M" -type f | wc -l)
[ "$files" -gt 1000 ] || fail "only $files files in the fixture"
[ "$("$LC" status --json "$M" | grep -o '"read_errors":[0-9]*')" = '"read_errors":0' ] || fail "read errors on the mount"
"$LC" unmount "$M" > "$W/unmount.out" || { cat "$W/unmount.out"; fail "unmount"; }
echo "OK: $files files of the node fixture read back identical through the mount"
echo "  $(cat "$W/unmount.out" | head -3 | tr '\n' ' ')"
