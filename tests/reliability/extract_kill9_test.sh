#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/reliability/extract_kill9_test.sh LAZYCACHE -- issue 13 item 8: `extract` killed with
# SIGKILL at several points leaves no temporary (files are unnamed O_TMPFILEs until complete),
# every file under its final name is complete, a new target appears only whole, and a full re-extract gives the tree back exactly
# with nothing extra, which packs without any temporary.
set -euo pipefail
LC=$(readlink -f "$1")
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
W=$(mktemp -d /tmp/lc-extract-kill9.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$W/src/r/a" "$W/src/r/b"
for i in $(seq 1 12); do head -c 3000000 /dev/urandom > "$W/src/r/a/f$i"; done
for i in $(seq 1 200); do echo "small $i" > "$W/src/r/b/s$i"; done
(cd "$W/src" && "$LC" pack --frame-size 1M -o "$W/a.tar.zst" r >/dev/null 2>&1) || fail "pack"
killed=0
# Killed while extracting into a new directory: files are unnamed until complete, nothing stays.
for delay in 0.05 0.1 0.2 0.3 0.5; do
  out=$W/new-$delay
  "$LC" extract -q --threads 1 -C "$out" "$W/a.tar.zst" & pid=$!
  sleep "$delay"
  if kill -9 "$pid" 2>/dev/null; then killed=$((killed + 1)); fi
  wait "$pid" 2>/dev/null || true; pid=
  left=$(find "$out" -name '.lazycache-tmp.*' 2>/dev/null | head -3 || true)
  [ -z "$left" ] || fail "kill -9 after ${delay}s left temporaries: $left"
  if [ -d "$out/r" ]; then  # whatever has its final name is complete
    for f in $(cd "$out" && find r -type f); do cmp -s "$W/src/$f" "$out/$f" || fail "partial file under its final name: $f"; done
  fi
  # A new target is built under a temporary name beside it and renamed when complete: after a
  # kill it is absent or whole (issue 16 item 3: files go straight under their final names).
  if [ -e "$out" ]; then diff -r --no-dereference "$W/src/r" "$out/r" >/dev/null || fail "kill -9 after ${delay}s left a partial tree at $out"; fi
done
# The staged target of a killed extract is removed by the next extract into the same parent.
"$LC" extract -q -C "$W/new-last" "$W/a.tar.zst" || fail "extract after the kills"
left=$(find "$W" -maxdepth 1 -name '.lazycache-tmp.*' | head -3)
[ -z "$left" ] || fail "staged targets of killed extracts stayed: $left"
diff -r --no-dereference "$W/src/r" "$W/new-last/r" || fail "extract after the kills differs"
[ "$killed" -gt 0 ] || echo "note: every extract finished before its kill"
# Killed while re-extracting over a tree: a file replacing an existing one goes through a named
# temporary (.lazycache-tmp.PID.N) that may stay; the next extract removes it, pack skips it.
"$LC" extract -q -C "$W/out" "$W/a.tar.zst" || fail "first extract"
for delay in 0.1 0.3; do
  "$LC" extract -q --threads 1 -C "$W/out" "$W/a.tar.zst" & pid=$!
  sleep "$delay"; kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true; pid=
done
"$LC" extract -q -C "$W/out" "$W/a.tar.zst" || fail "re-extract after the kills"
left=$(find "$W/out" -name '.lazycache-tmp.*' | head -3)
[ -z "$left" ] || fail "a full re-extract kept temporaries: $left"
diff -r --no-dereference "$W/src/r" "$W/out/r" || fail "re-extracted tree differs"
# A temporary of a dead writer planted by hand (what any kill leaves) is never packed.
sh -c 'exit 0' & wait $!; dead=$!
head -c 1000 /dev/urandom > "$W/out/r/a/.lazycache-tmp.$dead.0"
(cd "$W/out" && "$LC" pack -o "$W/b.tar.zst" r >/dev/null 2>&1) || fail "pack of the re-extracted tree"
if "$LC" ls "$W/b.tar.zst" | grep -q 'lazycache-tmp'; then fail "a temporary was packed"; fi
echo "ok ($killed extracts into new directories killed)"
