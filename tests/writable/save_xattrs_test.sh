#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `unmount --save` keeps extended attributes (docs/writable.md, "Extended attributes"), with a
# real FUSE mount and a local-directory store. Checked with stock `zstd -d | tar --xattrs -x`:
#  1. base saved with --xattrs: its xattrs and one set in the mount with setfattr (on a base file
#     and on a new file) are in the entry an incremental save writes; reading them opens no file
#     through the mount (the job's figures do not count the 100 unchanged files);
#  2. the same when the incremental path cannot be used (the base entry went away after the job
#     read it) and the whole merged view is packed;
#  3. base saved without --xattrs: user.* xattrs the job set are kept, others are not;
#  4. a cache miss (a plain directory): user.* xattrs the job set are kept.
# Skipped (exit 0, with a message) when FUSE cannot be used or the file system under /tmp has no
# user xattrs. Usage: save_xattrs_test.sh LAZYCACHE
set -euo pipefail
. "$(dirname "$0")/cli_test_lib.sh"
cli_test_setup "$1" lc-save-xattrs
touch "$W/probe"
if ! setfattr -n user.probe -v 1 "$W/probe" 2>/dev/null; then echo "SKIP: no user xattrs under /tmp"; exit 0; fi

# Restores entry KEY with stock tools into $W/x-KEY and prints NAME=VALUE of FILE (relative to $P).
xattr_of() {  # xattr_of KEY FILE NAME
  local d=$W/x-$1
  if [ ! -d "$d" ]; then mkdir "$d" && zstd -q -d < "$(entry_file "$1")" | tar --xattrs --xattrs-include='*' -x -C "$d"; fi
  getfattr --absolute-names --only-values -n "$3" "$d/${P#/}/$2" 2>/dev/null || echo "(none)"
}
expect_xattr() {  # expect_xattr KEY FILE NAME VALUE
  local got
  got=$(xattr_of "$1" "$2" "$3")
  [ "$got" = "$4" ] || fail "entry $1: $2 $3 is '$got', want '$4' ($5)"
}
base_tree() {  # base_tree KEY [--xattrs]
  rm -rf "$P" && mkdir -p "$P/pkg"
  for f in a b c; do seq 1 300 > "$P/pkg/$f.txt"; done
  mkdir "$P/many" && for f in $(seq 1 100); do echo "$f" > "$P/many/$f"; done
  setfattr -n user.base -v one "$P/pkg/a.txt"
  setfattr -n user.dir -v d "$P/pkg"
  # 4 KiB frames: pkg/ (whose mtime the job changes, so its unit is packed again) and many/ are
  # in different units.
  "$LC" save --key "$1" --frame-size 4K ${2:-} "$P" > /dev/null
  rm -rf "$P" && mkdir -p "$P"
}
job() {  # the job's xattr changes, in the mount
  [ "$(getfattr --absolute-names --only-values -n user.base "$P/pkg/a.txt" 2>/dev/null || true)" = "one" ] || [ "$1" = plain ] \
    || fail "the mount does not show the base xattr"
  setfattr -n user.new -v two "$P/pkg/b.txt"
  echo fresh > "$P/pkg/new.txt"
  setfattr -n user.fresh -v three "$P/pkg/new.txt"
}

# 1. Incremental save on a base with xattrs.
base_tree x-v1 --xattrs
"$LC" mount --key x-v2 --restore-keys x- "$P" > /dev/null
job mounted
"$LC" unmount --save "$P" > "$W/out" 2>&1 || fail "unmount --save: $(cat "$W/out")"
grep -Eq "[0-9]+ frames reused / [0-9]+ compressed" "$W/out" || fail "want an incremental save: $(cat "$W/out")"
# The save reads xattrs without opening files: the job's figures must not count the scan of
# the 100 files of many/ (the job and the save's reads of changed files open a few).
opened=$(grep -o "[0-9]* files opened" "$W/out" | cut -d' ' -f1)
[ "${opened:-999}" -lt 20 ] || fail "the save's xattr scan opened files through the mount: $(cat "$W/out")"
expect_xattr x-v2 pkg/a.txt user.base one "the base's xattr, incremental"
expect_xattr x-v2 pkg user.dir d "the base's directory xattr, incremental"
expect_xattr x-v2 pkg/b.txt user.new two "set in the mount on a base file, incremental"
expect_xattr x-v2 pkg/new.txt user.fresh three "set in the mount on a new file, incremental"

# 2. The whole merged view packed: the base entry is gone by the time of the save.
"$LC" mount --key x-v3 --restore-keys x-v1 "$P" > /dev/null
cat "$P"/pkg/* "$P"/many/* > /dev/null  # every frame in the cache: the full pack needs no store
job mounted
mv "$(entry_file x-v1)" "$W/x-v1.away"
"$LC" unmount --save "$P" > "$W/out" 2>&1 || fail "unmount --save without the base: $(cat "$W/out")"
grep -q "packing the whole merged view" "$W/out" || fail "want a full save: $(cat "$W/out")"
mv "$W/x-v1.away" "$(entry_file x-v1)"
expect_xattr x-v3 pkg/a.txt user.base one "the base's xattr, full"
expect_xattr x-v3 pkg user.dir d "the base's directory xattr, full"
expect_xattr x-v3 pkg/b.txt user.new two "set in the mount on a base file, full"
expect_xattr x-v3 pkg/new.txt user.fresh three "set in the mount on a new file, full"

# 3. A base without xattrs: user.* set by the job kept, trusted.* (if the mount takes it) not.
base_tree y-v1
"$LC" mount --key y-v2 --restore-keys y- "$P" > /dev/null
job plain
trusted=0
setfattr -n trusted.t -v t "$P/pkg/new.txt" 2>/dev/null && trusted=1
"$LC" unmount --save "$P" > "$W/out" 2>&1 || fail "unmount --save: $(cat "$W/out")"
expect_xattr y-v2 pkg/b.txt user.new two "set in the mount, base without xattrs"
expect_xattr y-v2 pkg/new.txt user.fresh three "set in the mount on a new file, base without xattrs"
if [ "$trusted" = 1 ]; then expect_xattr y-v2 pkg/new.txt trusted.t "(none)" "trusted.* from a base without xattrs"; fi

# 4. A miss: the plain directory's user.* xattrs.
rm -rf "$P" && mkdir -p "$P"
"$LC" mount --key z-v1 "$P" > /dev/null
mkdir -p "$P/pkg" && seq 1 10 > "$P/pkg/b.txt"
job plain
"$LC" unmount --save "$P" > "$W/out" 2>&1 || fail "unmount --save of a miss: $(cat "$W/out")"
expect_xattr z-v1 pkg/b.txt user.new two "set on a plain directory after a miss"
expect_xattr z-v1 pkg/new.txt user.fresh three "set on a new file after a miss"
echo "OK"
