#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fuse_fallback_test.sh LAZYCACHE: makes FUSE unusable for real -- a private mount namespace in
# which /dev/null is bind-mounted over /dev/fuse, as in a container started without the device --
# and checks that
#   1. `doctor` says FUSE is not usable and why (exit 1);
#   2. `mount` refuses up front with that reason, leaving no mount;
#   3. `restore --mode auto` extracts instead, says so and why, and the files are right;
#   4. `restore --mode mount` fails with the reason instead of extracting.
# Outside the namespace nothing changes. Needs root (unshare -m, mount --bind).
set -euo pipefail
LC=$(readlink -f "${1:?usage: fuse_fallback_test.sh LAZYCACHE}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for a mount namespace"; exit 77; }
[ -c /dev/fuse ] || { echo "SKIP: no /dev/fuse to hide"; exit 77; }
WORK=$(mktemp -d /tmp/lazycache-fallback.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export LAZYCACHE_CONFIG= LAZYCACHE_CACHE_DIR="$WORK/chunks"

# Runs "$@" with /dev/fuse hidden; stdout+stderr to $WORK/out, returns the command's status.
without_fuse() {
  unshare -m --propagation private -- bash -c 'mount --bind /dev/null /dev/fuse && exec "$@"' _ "$@" \
    >"$WORK/out" 2>&1
}
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$WORK/out"; exit 1; }

echo "== doctor without FUSE"
set +e; without_fuse "$LC" doctor; rc=$?; set -e
[ $rc = 1 ] || fail "doctor exited $rc, expected 1"
grep -q '^fuse: NOT usable: /dev/fuse is not the FUSE device (char 1:3' "$WORK/out" || fail "doctor gave no reason"

mkdir -p "$WORK/src/tree/sub"
printf 'cached file\n' > "$WORK/src/tree/sub/a.txt"
head -c 300000 /dev/urandom > "$WORK/src/tree/blob"
(cd "$WORK/src" && "$LC" pack -q -o "$WORK/c.tar.zst" tree >/dev/null 2>&1 || "$LC" pack -o "$WORK/c.tar.zst" tree >/dev/null)

echo "== mount without FUSE"
mkdir -p "$WORK/mnt"
set +e; without_fuse "$LC" mount --archive "$WORK/c.tar.zst" "$WORK/mnt"; rc=$?; set -e
[ $rc != 0 ] || fail "mount succeeded without FUSE"
grep -q 'FUSE cannot be used here: /dev/fuse is not the FUSE device' "$WORK/out" || fail "mount did not say why"
mountpoint -q "$WORK/mnt" && fail "a mount was left at $WORK/mnt"

if ! "$LC" --help | grep -q '^  restore '; then
  echo "SKIP: this lazycache has no restore command yet (doctor and mount checked)"
  exit 77
fi
echo "== save to a local store, then restore --mode auto without FUSE"
STORE="$WORK/store"
(cd "$WORK/src" && "$LC" save --store "$STORE" --key fallback-1 "$WORK/src/tree" >/dev/null 2>&1) ||
  { "$LC" save --store "$STORE" --key fallback-1 "$WORK/src/tree"; fail "save"; }
mv "$WORK/src/tree" "$WORK/src/tree.orig"
set +e; without_fuse "$LC" restore --mode auto --store "$STORE" --key fallback-1 "$WORK/src/tree"; rc=$?; set -e
[ $rc = 0 ] || fail "restore --mode auto exited $rc"
grep -qi 'extract' "$WORK/out" || fail "restore did not say it extracts"
grep -q '/dev/fuse is not the FUSE device' "$WORK/out" || fail "restore did not say why it extracts"
mountpoint -q "$WORK/src/tree" && fail "restore mounted although FUSE was hidden"
diff -r "$WORK/src/tree.orig" "$WORK/src/tree" || fail "extracted files differ"

echo "== restore --mode mount without FUSE fails with the reason"
rm -rf "$WORK/src/tree"
set +e; without_fuse "$LC" restore --mode mount --store "$STORE" --key fallback-1 "$WORK/src/tree"; rc=$?; set -e
[ $rc != 0 ] || fail "restore --mode mount succeeded without FUSE"
grep -q '/dev/fuse is not the FUSE device' "$WORK/out" || fail "restore --mode mount did not say why"
echo "fuse fallback: ok"
