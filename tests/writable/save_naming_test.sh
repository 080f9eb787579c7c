#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One naming rule for cache members (issue 17 item 3), end to end with a local-directory store:
#  - `save` of a relative PATH names its members by the absolute path, as `save` of the absolute
#    path does from any other directory (the two archives list the same members);
#  - make demo's flow: save a relative path, mount it from another directory, change it,
#    `unmount --save`: the save builds on the mounted entry (incremental, with its plan printed)
#    instead of "incremental save not possible";
#  - an entry saved before the rule (members named by the relative path) is still built on:
#    unmount --save names the path as the mounted entry does;
#  - the new entries restore with GNU tar and bsdtar to the changed tree, directory mtimes
#    included (item 7), and verify;
#  - a base replaced between mount and save is not built on: the merged view is packed whole.
# Skipped (exit 0, with a message) when FUSE cannot be used. Usage: save_naming_test.sh LAZYCACHE
set -euo pipefail
. "$(dirname "$0")/cli_test_lib.sh"
cli_test_setup "$1" lc-save-naming

WS=$(dirname "$P")
# 3 packages x 24 files of 2-13 KiB; 16 KiB frames, so a change is a few frames of many.
mkdir -p "$P"/pkg-{a,b,c}/lib
for d in a b c; do for f in $(seq 1 24); do seq 1 $((f * 400 + 300)) > "$P/pkg-$d/lib/f$f.js"; done; done
find "$P" -type d -exec touch -d '2020-01-02 03:04:05' {} +
cp -a "$P" "$W/orig"
members() { zstd -q -d < "$1" | tar -t | LC_ALL=C sort; }
# stat only (find opens no file): reading files through the mount would make them the hot list.
dir_times() { (cd "$1" && find . -type d -printf '%T@ %m %p\n' | LC_ALL=C sort -k3); }
changes() {
  echo changed >> "$1/pkg-a/lib/f2.js"
  seq 1 50 > "$1/pkg-c/lib/new.js"        # the directory's mtime changes
  rm "$1/pkg-b/lib/f4.js"
  touch -d '2021-03-04 05:06:07' "$1/pkg-a/lib"
}

# Relative from the workspace and absolute from /: the same member names.
(cd "$WS" && "$LC" save --key rel-v1 --frame-size 16K "$(basename "$P")" > "$W/out") || fail "save of a relative path: $(cat "$W/out")"
(cd / && "$LC" save --key abs-v1 --frame-size 16K "$P" > "$W/out") || fail "save of an absolute path: $(cat "$W/out")"
members "$(entry_file rel-v1)" > "$W/rel.members"
members "$(entry_file abs-v1)" > "$W/abs.members"
diff "$W/rel.members" "$W/abs.members" > /dev/null || fail "relative and absolute saves name members differently: $(diff "$W/rel.members" "$W/abs.members" | head -5)"
grep -qx "${P#/}/pkg-a/lib/f1.js" "$W/rel.members" || fail "members are not named by the absolute path: $(head -3 "$W/rel.members")"

# An entry as saves before the rule made it: the relative name, the absolute path recorded.
(cd "$WS" && "$LC" pack --frame-size 16K -o "$(entry_file old-v1)" "$(basename "$P")" > /dev/null)

save_changed() {  # KEY RESTORE_PREFIX: mount from another directory, change, unmount --save
  rm -rf "$P" && mkdir -p "$P"
  (cd / && "$LC" mount --key "$1" --restore-keys "$2" --cache-dir "$W/job-cache" "$P" > "$W/out") || fail "mount: $(cat "$W/out")"
  cat "$P"/pkg-b/lib/f1.js > /dev/null
  changes "$P"
  dir_times "$P" > "$W/want-dirs"
  rm -rf "$W/twin" && cp -a "$W/orig" "$W/twin" && changes "$W/twin"
  (cd "$WS" && "$LC" unmount --save "$(basename "$P")" > "$W/out" 2> "$W/err") || fail "unmount --save: $(cat "$W/out" "$W/err")"
  cat "$W/out" "$W/err"
  ! grep -q "incremental save not possible" "$W/err" || fail "$1 was not built on the mounted entry: $(cat "$W/err")"
  grep -q "frames reused" "$W/out" || fail "$1: no incremental counts: $(cat "$W/out")"
  grep -q "; plan: " "$W/out" || fail "$1: the save line does not say which plan and why: $(cat "$W/out")"
  [[ $(cat "$W/out") =~ base\ frames:\ ([0-9]+)\ copied\ by\ the\ store ]] || fail "$1: no store copy counts: $(cat "$W/out")"
  [ "${BASH_REMATCH[1]}" -gt 10 ] || fail "$1: the local store copied too few frames: $(cat "$W/out")"
}

check_restores() {  # KEY
  for tar in tar bsdtar; do
    rm -rf "$W/x" && mkdir "$W/x"
    zstd -q -d < "$(entry_file "$1")" | $tar -x -f - -C "$W/x" || fail "$tar -x of $1"
    R=$W/x/$2
    [ -d "$R" ] || fail "$1 does not hold $2: $(ls -R "$W/x" | head)"
    diff <(dir_times "$R") "$W/want-dirs" || fail "$tar leaves directories of $1 with other metadata than the saved tree"
    diff -r "$R" "$W/twin" || fail "$tar: files of $1 differ from the changed tree"
  done
  "$LC" verify "$(entry_file "$1")" > /dev/null || fail "verify $1"
}

save_changed rel-v2 rel-v1
members "$(entry_file rel-v2)" | grep -q "^${P#/}/pkg-c/lib/new.js$" || fail "rel-v2 names members otherwise"
check_restores rel-v2 "${P#/}"

save_changed old-v2 old-v1
members "$(entry_file old-v2)" | grep -q "^$(basename "$P")/pkg-c/lib/new.js$" || fail "old-v2 does not keep the mounted entry's names"
check_restores old-v2 "$(basename "$P")"
# The base replaced between mount and save: not built on (the mount recorded its ETag); the
# merged view is packed whole instead (every frame read, so the mount needs no store).
rm -rf "$P" && mkdir -p "$P"
(cd / && "$LC" mount --key rel-v3 --restore-keys rel-v2 --cache-dir "$W/job-cache" "$P" > /dev/null)
find "$P" -type f -exec cat {} + > /dev/null
echo again >> "$P/pkg-b/lib/f2.js"
# Replaced by an entry with the same member names (and the original content).
cp "$(entry_file abs-v1)" "$W/store/rel-v2.tar.zst.new" && mv "$W/store/rel-v2.tar.zst.new" "$(entry_file rel-v2)"
"$LC" unmount --save "$P" > "$W/out" 2> "$W/err" || fail "unmount --save after the base was replaced: $(cat "$W/out" "$W/err")"
grep -q "was replaced after it was mounted" "$W/err" || fail "a replaced base was built on: $(cat "$W/out" "$W/err")"
rm -rf "$W/x" && mkdir "$W/x" && zstd -q -d < "$(entry_file rel-v3)" | tar -x -C "$W/x"
echo again >> "$W/twin/pkg-b/lib/f2.js"
diff -r "$W/x/${P#/}" "$W/twin" > /dev/null || fail "rel-v3 is not the merged view of the mount"
echo "PASS"
