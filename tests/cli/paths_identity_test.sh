#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli/paths_identity_test.sh LAZYCACHE local|s3 [ENV_FILE]
# The saved paths are part of an entry's identity (issue 18 item 9; remote/cache_keys.h, its
# version), against a local directory store or an S3 server (ENV_FILE from tests/servers/*.sh):
#  - `save --key K A` then `restore/lookup/mount --key K B` is a miss that says what K was saved
#    for (exit 0, 3 with --fail-on-cache-miss), and B gets nothing of A's tree;
#  - --any-paths takes it anyway; no PATH at all takes the newest entry of K;
#  - the paths count in order; a save for B then makes a second entry of K (not "already
#    exists"), and each path set restores its own tree;
#  - a restore-keys prefix takes the newest entry of these paths, not a newer one of others;
#  - ls/cat/extract --key --paths pick the entry saved for those paths;
#  - list shows both versions, delete KEY removes every version;
#  - local only: an entry an older lazycache saved (no version in its name) is a miss naming its
#    paths, taken with --any-paths; a mount of other paths is a miss that `unmount --save` saves
#    for the mount's own paths (FUSE permitting).
set -euo pipefail
. "$(dirname "$0")/store_test_lib.sh"
store_test_setup "$1" "$2" "${3:-}" paths-id
unset GITHUB_OUTPUT
A=$W/job/a; B=$W/job/b; C=$W/job/c
mkdir -p "$A" "$C"; echo "tree of a" > "$A/which"; echo "tree of c" > "$C/which"

run 0 lc save --key k "$A"
rm -rf "$A"
# Another path under the same key: a miss, named as such, and nothing of A's tree at B.
run 0 lc restore --extract --key k "$B"
grep -q "no entry for key k with these paths ($B) in .*; saved for: $A (--any-paths takes it)" "$W/err" || fail "miss message: $(cat "$W/err")"
grep -q "^cache-hit=false" "$W/out" && grep -q "^cache-matched-key=$" "$W/out" || fail "miss outputs: $(cat "$W/out")"
[ ! -e "$B/which" ] || fail "restore of other paths restored the key's tree"
run 3 lc restore --extract --fail-on-cache-miss --key k "$B"
run 0 lc lookup --key k "$B"
grep -q "saved for: $A" "$W/err" && grep -q "^cache-hit=false" "$W/out" || fail "lookup of other paths: $(cat "$W/out" "$W/err")"
run 3 lc lookup --fail-on-cache-miss --key k "$B"
run 0 lc lookup --key k "$A"
grep -q "^cache-hit=true" "$W/out" || fail "lookup of the saved path: $(cat "$W/out" "$W/err")"
run 0 lc lookup --key k
grep -q "^cache-hit=true" "$W/out" || fail "lookup without paths (any version): $(cat "$W/out" "$W/err")"
# --any-paths: the tree anyway (placed in order, as before versions).
run 0 lc restore --extract --any-paths --key k "$B"
[ "$(cat "$B/which")" = "tree of a" ] || fail "--any-paths restored $(cat "$B/which" 2>&1)"
# No PATH: the newest entry of the key goes back where it was saved.
run 0 lc restore --extract --key k
[ "$(cat "$A/which")" = "tree of a" ] || fail "restore without paths"

# A save for B makes a second entry of k; each path set gets its own tree.
echo "tree of b" > "$B/which"
run 0 lc save --key k "$B"
grep -q "^saved key k" "$W/out" || fail "save for other paths was skipped: $(cat "$W/out" "$W/err")"
run 0 lc save --key k "$B"
grep -q "already exists" "$W/out" || fail "second save for B not skipped: $(cat "$W/out")"
rm -rf "$A" "$B"
run 0 lc restore --extract --key k "$B"
[ "$(cat "$B/which")" = "tree of b" ] || fail "k for B restored $(cat "$B/which" 2>&1)"
run 0 lc restore --extract --key k "$A"
[ "$(cat "$A/which")" = "tree of a" ] || fail "k for A restored $(cat "$A/which" 2>&1)"
lc list --json --prefix k > "$W/json" 2>/dev/null
[ "$(grep -c '"key":"k",' "$W/json")" = 2 ] || fail "list: $(cat "$W/json")"
grep -q '"object":"k![0-9a-f]\{16\}\.tar\.zst",.*"version":"[0-9a-f]\{16\}"' "$W/json" || fail "list --json version: $(cat "$W/json")"
# ls / cat / extract --key: --paths picks the entry of those paths.
[ "$(lc cat --key k --paths "$A" "${A#/}/which")" = "tree of a" ] || fail "cat --key --paths A"
[ "$(lc cat --key k --paths "$B" "${B#/}/which")" = "tree of b" ] || fail "cat --key --paths B"
run 3 lc ls --key k --paths "$C"
grep -q "no entry for key k with these paths ($C)" "$W/err" || fail "ls --key --paths C: $(cat "$W/err")"

# In order: saved for (A, C), asked for (C, A) is another entry.
run 0 lc save --key two "$A" "$C"
run 0 lc restore --extract --key two "$C" "$A"
grep -q "saved for: $A, $C" "$W/err" || fail "paths in another order: $(cat "$W/err")"

# Restore keys: the newest entry of these paths, not a newer one saved for others.
run 0 lc save --key p-1 "$A"
sleep 1.1  # Last-Modified has one-second resolution
run 0 lc save --key p-2 "$C"
run 0 lc lookup --key p-x --restore-keys p- "$A"
grep -q "^cache-matched-key=p-1$" "$W/out" || fail "restore-keys took another path set's entry: $(cat "$W/out")"

# delete KEY: every entry of the key, whatever its paths.
run 0 lc delete k
[ "$(grep -c '^deleted key k ' "$W/out")" = 2 ] || fail "delete: $(cat "$W/out" "$W/err")"
run 3 lc lookup --fail-on-cache-miss --key k

if [ "$KIND" = local ]; then
  # An entry an older lazycache saved: its name has no version. Known by its paths, not taken.
  cp "$(ls "$W"/store/p-1\!*.tar.zst)" "$W/store/old.tar.zst"
  run 0 lc restore --extract --key old "$A"
  grep -q "no entry for key old with these paths ($A) .*; saved for: $A " "$W/err" || fail "old entry: $(cat "$W/err")"
  run 0 lc restore --extract --key old
  grep -q "restored key old" "$W/out" || fail "old entry without paths: $(cat "$W/out" "$W/err")"
  run 0 lc lookup --any-paths --key old "$A"
  grep -q "^cache-hit=true" "$W/out" || fail "old entry with --any-paths: $(cat "$W/out" "$W/err")"
  grep -q 'paths unversioned' <(lc list --prefix old 2>/dev/null) || fail "list of an old entry: $(lc list --prefix old 2>&1)"

  if "$LC" doctor --json --no-store-check >/dev/null 2>&1; then
    # A mount of other paths is a miss: a plain directory, saved for its own paths.
    run 0 lc mount --key p-1 "$B"
    grep -q "no entry for key p-1 with these paths ($B)" "$W/err" || fail "mount of other paths: $(cat "$W/out" "$W/err")"
    ! grep -Eq " $B (fuse|overlay)" /proc/mounts || fail "mounted another path set's entry at $B"
    echo "made at b" > "$B/which"
    run 0 lc unmount --save "$B"
    grep -q "as key p-1" "$W/out" || fail "unmount --save: $(cat "$W/out" "$W/err")"
    rm -rf "$B"
    run 0 lc restore --extract --key p-1 "$B"
    [ "$(cat "$B/which")" = "made at b" ] || fail "p-1 for B restored $(cat "$B/which" 2>&1)"
    run 0 lc mount --any-paths --key p-1 --restore-keys nothing- "$W/job/d"
    grep -Eq " $W/job/d (fuse|overlay)" /proc/mounts || fail "--any-paths did not mount"
    "$LC" unmount "$W/job/d" > /dev/null
  else
    echo "note: FUSE not usable here; the mount part was skipped"
  fi
fi
echo ok
