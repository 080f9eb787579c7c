#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `mount` (writable) + `unmount --save` through the CLI, with a local-directory store:
#  1. a miss leaves a plain directory; unmount --save saves it under the primary key;
#  2. an exact hit with nothing changed is not saved (and says so);
#  3. a restore-key hit changed by tools (edits, deletes, renames, git clone) is saved under the
#     new primary key; the new entry restores with stock `zstd -d | tar -x` to exactly the tree
#     the tools left, and a new mount of it shows that tree; the hot list is the read order;
#  4. kill -9 during a save leaves the older entries intact, no new entry visible, the mount and
#     its changes in place; a second unmount --save then succeeds;
#  5. an entry mounted elsewhere (--any-paths) and saved keeps the job's reads as its learned
#     layout, named by the new path (the access list names them by the mounted entry's).
# Skipped (exit 0, with a message) when FUSE cannot be used. Usage: unmount_save_test.sh LAZYCACHE
set -euo pipefail
. "$(dirname "$0")/cli_test_lib.sh"
cli_test_setup "$1" lc-writable-cli
Q=$W/elsewhere/deps  # case 5's mount point, unmounted in teardown too
trap 'if mountpoint -q "$Q" 2>/dev/null; then "$LC" unmount --lazy "$Q" >/dev/null 2>&1 || fusermount3 -u -z "$Q" || true; fi; cli_test_cleanup' EXIT

# 1. Miss: plain directory, filled by the job, saved on unmount.
mkdir -p "$P"
"$LC" mount --key deps-v1 "$P" > "$W/out"
grep -q "cache miss" "$W/out" || fail "mount of a missing key: $(cat "$W/out")"
mountpoint -q "$P" && fail "a miss must leave a plain directory"
for i in $(seq 1 60); do mkdir -p "$P/pkg-$i/lib"; seq 1 $((i * 50)) > "$P/pkg-$i/index.js"; echo "{\"n\":$i}" > "$P/pkg-$i/package.json"; done
head -c 3000000 /dev/urandom > "$P/pkg-1/lib/big.bin"
ln -s ../pkg-1/index.js "$P/pkg-2/alias.js"
"$LC" unmount --save "$P" > "$W/out"
grep -q "saved .* as key deps-v1" "$W/out" || fail "save after a miss: $(cat "$W/out")"
[ -f "$(entry_file deps-v1)" ] || fail "no deps-v1 entry in the store"

# The next job starts with P empty, as on a fresh runner (mount refuses to hide files).
rm -rf "$P" && mkdir -p "$P"

# 2. Exact hit, nothing changed: reads only, no save.
"$LC" mount --key deps-v1 "$P" > "$W/out"
mountpoint -q "$P" || fail "exact hit did not mount"
cat "$P/pkg-7/index.js" "$P/pkg-3/package.json" > /dev/null
"$LC" unmount --save "$P" > "$W/out"
grep -q "cache hit on key deps-v1 and nothing changed" "$W/out" || fail "unchanged exact hit: $(cat "$W/out")"
mountpoint -q "$P" && fail "still mounted after unmount --save"

# 3. Restore-key hit for deps-v2, changed by tools, saved, restored with stock tools. The same
#    changes go to a plain twin (deps-v1 extracted with zstd | tar): the reference tree.
git init -q "$W/repo" && (cd "$W/repo" && seq 1 100 > a.txt && git add a.txt && git -c user.email=t@t -c user.name=t commit -q -m one)
changes() {
  echo "changed" >> "$1/pkg-5/index.js"
  rm -r "$1/pkg-6"
  mv "$1/pkg-7" "$1/pkg-7-renamed"
  printf 'XYZ' | dd of="$1/pkg-1/lib/big.bin" bs=1 seek=1000000 conv=notrunc status=none
  mkdir "$1/new" && echo fresh > "$1/new/file.txt"
  git clone -q "file://$W/repo" "$1/cloned" && git -C "$1/cloned" fsck --strict 2>/dev/null
}
mkdir "$W/twin"
zstd -q -d < "$(entry_file deps-v1)" | tar -x -C "$W/twin"
T=$W/twin/${P#/}
"$LC" mount --key deps-v2 --restore-keys deps- "$P" > "$W/out"
grep -q "cache-matched-key=deps-v1" "$W/out" || fail "restore-key mount: $(cat "$W/out")"
cat "$P/pkg-9/index.js" "$P/pkg-4/index.js" > /dev/null   # the job's reads: the next hot list
# No pause: unmount --save makes the daemon write its access list as of now.
changes "$P"
changes "$T"
"$LC" unmount --save "$P" > "$W/out"
grep -q "saved .* as key deps-v2" "$W/out" || fail "save of a changed restore-key mount: $(cat "$W/out")"
grep -Eq " [2-9][0-9]* hot files first" "$W/out" || fail "hot list of the job's reads: $(cat "$W/out")"
grep -Eq "[0-9]+ frames reused / [0-9]+ compressed" "$W/out" || fail "a save on top of the mounted entry must be incremental: $(cat "$W/out")"
listing "$T" > "$W/expected"
mkdir "$W/restored"
zstd -q -d < "$(entry_file deps-v2)" | tar -x -C "$W/restored"
listing "$W/restored/${P#/}" > "$W/restored.list"
diff "$W/expected" "$W/restored.list" > "$W/diff" || fail "zstd | tar restore differs from the twin: $(head -5 "$W/diff")"
"$LC" mount --key deps-v2 "$P" > /dev/null
listing "$P" > "$W/remounted.list"
diff "$W/expected" "$W/remounted.list" > "$W/diff" || fail "new mount differs from the twin: $(head -5 "$W/diff")"

# 4. kill -9 during a save: nothing half-written is visible, older entries stay, changes stay.
"$LC" unmount "$P" > /dev/null
"$LC" mount --key deps-v3 --restore-keys deps- "$P" > /dev/null
head -c 150000000 /dev/urandom > "$P/huge.bin"
"$LC" unmount --save "$P" > "$W/out" 2>&1 &
SAVER=$!
for _ in $(seq 1 200); do
  [ -n "$(ls -A "$W/store/.lazycache-tmp" 2>/dev/null)" ] && break
  sleep 0.05
done
kill -9 $SAVER
wait $SAVER 2>/dev/null || true
[ -f "$(entry_file deps-v3)" ] && fail "deps-v3 appeared although its save was killed"
mountpoint -q "$P" || fail "the mount went away with the killed save"
[ "$(stat -c %s "$P/huge.bin")" = 150000000 ] || fail "the change was lost"
mkdir "$W/restored2"
zstd -q -d < "$(entry_file deps-v2)" | tar -x -C "$W/restored2"
listing "$W/restored2/${P#/}" > "$W/restored2.list"
diff "$W/expected" "$W/restored2.list" > /dev/null || fail "deps-v2 damaged by the killed save"
"$LC" unmount --save "$P" > "$W/out"
grep -q "saved .* as key deps-v3" "$W/out" || fail "save after the killed one: $(cat "$W/out")"

# 5. Mounted elsewhere: the save is a full pack of the merged view under Q's name, and its hot
#    list must name Q's files (until session 41 it named deps-v2's and none resolved).
mkdir -p "$Q"
"$LC" mount --key deps-moved --restore-keys deps-v2 --any-paths "$Q" > "$W/out"
grep -q "cache-matched-key=deps-v2" "$W/out" || fail "mount elsewhere: $(cat "$W/out")"
cat "$Q/pkg-9/index.js" "$Q/pkg-4/index.js" "$Q/pkg-11/package.json" > /dev/null
echo more >> "$Q/pkg-5/index.js"
"$LC" unmount --save "$Q" > "$W/out" 2>&1
grep -q "saved .* as key deps-moved" "$W/out" || fail "save of an entry mounted elsewhere: $(cat "$W/out")"
hot=$("$LC" info "$(entry_file deps-moved "$Q")" | sed -n 's/^hot list: *\([0-9]*\) files$/\1/p')
[ "${hot:-0}" -ge 3 ] || fail "learned layout of a save of an entry mounted elsewhere: ${hot:-no} hot files ($(cat "$W/out"))"
echo "OK"
