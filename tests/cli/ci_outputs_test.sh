#!/usr/bin/env bash
# What a CI workflow sees from restore and mount (issue 18 items 1, 3, 7), local store, real FUSE:
#  - outputs (stdout and $GITHUB_OUTPUT) come only after success: a restore that finds the entry
#    but cannot place it, and a mount that fails, never say cache-hit=true;
#  - --fail-on-cache-miss exits 3 on a miss for restore (FUSE usable) and for mount;
#  - mount refuses a non-empty directory (its files stay visible), --allow-nonempty mounts over it
#    and unmount gives the files back.
# Usage: ci_outputs_test.sh path/to/lazycache   (exit 77: FUSE not usable here)
set -euo pipefail
LC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
W=$(mktemp -d /tmp/lc-ci-outputs.XXXXXX)
cleanup() {
  for m in $(awk -v w="$W" '$2 ~ "^"w {print $2}' /proc/mounts); do "$LC" unmount --lazy "$m" >/dev/null 2>&1 || umount -l "$m" || true; done
  rm -rf "$W"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
run() {  # run CODE CMD...: runs with GITHUB_OUTPUT=$W/gh (emptied first), output in $W/out, $W/err
  local want=$1; shift
  : > "$W/gh"
  set +e; GITHUB_OUTPUT=$W/gh "$@" >"$W/out" 2>"$W/err"; local got=$?; set -e
  [ "$got" = "$want" ] || { cat "$W/out" "$W/err" >&2; fail "'$*' exited $got, expected $want"; }
}
"$LC" doctor --json >/dev/null 2>&1 || { echo "SKIP: FUSE is not usable here"; exit 77; }

export LAZYCACHE_RUN_DIR=$W/run LAZYCACHE_CACHE_DIR=$W/chunks LAZYCACHE_CONFIG='' LAZYCACHE_STORE=file://$W/store
mkdir -p "$W/src/a" "$W/src/b"
echo from-cache > "$W/src/a/hello.txt"
echo other > "$W/src/b/other.txt"
"$LC" save --key two "$W/src/a" "$W/src/b" >/dev/null
"$LC" save --key one "$W/src/a" >/dev/null
# The entries are used at other paths than saved: --any-paths below (the paths are part of an
# entry's identity; tests/cli/paths_identity_test.sh).

# 1. The entry is taken (--any-paths) but cannot be placed at one path: no cache-hit=true anywhere.
: > "$W/gh"
set +e; GITHUB_OUTPUT=$W/gh "$LC" restore --extract --any-paths --key two "$W/dest" >"$W/out" 2>"$W/err"; rc=$?; set -e
[ "$rc" != 0 ] || fail "restore of a two-root entry to one path succeeded"
! grep -q 'cache-hit=true' "$W/out" "$W/gh" || fail "a failed restore printed cache-hit=true: $(cat "$W/out" "$W/gh")"
[ ! -s "$W/gh" ] || fail "a failed restore wrote \$GITHUB_OUTPUT: $(cat "$W/gh")"

# 1 and 7. A mount over a non-empty directory is refused, after the lookup: no outputs at all.
mkdir -p "$W/full"
echo mine > "$W/full/mine.txt"
run 1 "$LC" mount --any-paths --key one "$W/full"
grep -q 'is not empty' "$W/err" || fail "the refusal does not say the directory is not empty: $(cat "$W/err")"
grep -q -- '--allow-nonempty' "$W/err" || fail "the refusal does not name --allow-nonempty"
[ ! -s "$W/gh" ] && ! grep -q 'cache-hit' "$W/out" || fail "a failed mount printed outputs: $(cat "$W/out" "$W/gh")"
[ "$(cat "$W/full/mine.txt")" = mine ] || fail "the directory's file is gone"
! grep -q " $W/full " /proc/mounts || fail "the refused mount is mounted"

# 7. --allow-nonempty: the entry is seen, and the files are back after unmount.
run 0 "$LC" mount --allow-nonempty --any-paths --key one "$W/full"
grep -q 'cache-hit=true' "$W/gh" || fail "a mount that worked wrote no cache-hit=true"
[ "$(cat "$W/full/hello.txt")" = from-cache ] || fail "the entry is not mounted over the directory"
"$LC" unmount "$W/full" >/dev/null
[ "$(cat "$W/full/mine.txt")" = mine ] || fail "unmount did not give the directory's file back"

# 3. --fail-on-cache-miss: exit 3 on a miss, for restore with FUSE usable, for --extract and for mount.
run 3 "$LC" restore --fail-on-cache-miss --key absent "$W/m1"
grep -q 'cache-hit=false' "$W/gh" || fail "a miss should write cache-hit=false"
grep -q "file://$W/store\|$W/store" "$W/out" "$W/err" || fail "the miss message does not name the store"
run 3 "$LC" restore --extract --fail-on-cache-miss --key absent "$W/m2"
run 3 "$LC" mount --fail-on-cache-miss --key absent "$W/m3"
! grep -q " $W/m3 " /proc/mounts || fail "a miss mounted something"
run 0 "$LC" mount --key absent "$W/m4"   # without the option a miss is not an error
grep -q 'cache-hit=false' "$W/gh" || fail "a miss should write cache-hit=false"

# A restore that works (it mounts: FUSE is usable) writes the outputs.
run 0 "$LC" restore --any-paths --key one "$W/ok"
grep -q 'cache-hit=true' "$W/gh" || fail "a restore that worked wrote no cache-hit=true"
[ "$(cat "$W/ok/hello.txt")" = from-cache ] || fail "restore did not restore"
"$LC" unmount "$W/ok" >/dev/null
echo "ok"
