#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `unmount --save` of a busy or failing mount loses nothing (docs/reliability.md, "Busy and
# failed unmount --save"), with a real FUSE mount and a local-directory store:
#  1. a process holds a file open under the mount: unmount --save exits 1 naming the path, the
#     holder and `fuser -vm PATH`, saves nothing, and the mount keeps serving the job's changes
#     (and takes more); after the holder closes, the same command saves them and unmounts;
#  2. a file opened while the save runs (after the busy check): the unmount fails, the entry is
#     saved, the mount, its changes and its save record stay; the retry unmounts and cleans up;
#  3. a save that fails (the store is unusable) keeps the mount, its changes and the record; a
#     retry once the store is back saves them.
# Skipped (exit 0, with a message) when FUSE cannot be used. Usage: unmount_busy_test.sh LAZYCACHE
set -euo pipefail
. "$(dirname "$0")/cli_test_lib.sh"
cli_test_setup "$1" lc-unmount-busy
HOLDER=
stop_holder() { if [ -n "$HOLDER" ]; then kill "$HOLDER" 2>/dev/null || true; wait "$HOLDER" 2>/dev/null || true; HOLDER=; fi; }
trap 'stop_holder; cli_test_cleanup' EXIT
# The save record `mount` writes for $P (tools/save_record.h).
RECORD=$LAZYCACHE_RUN_DIR/save-$(echo "$P" | tr / _).info
saved_file() {  # saved_file KEY FILE: FILE's content in entry KEY, by stock zstd + tar
  zstd -q -d < "$(entry_file "$1")" | tar -xO "${P#/}/$2"
}
# After a failed unmount --save: the mount still serves the job's change and takes a write (to
# pkg/more.txt), and its save record is in place.
kept_mounted() {  # kept_mounted FILE CONTENT CASE
  mountpoint -q "$P" || fail "$3: the mount went away"
  [ "$(cat "$P/$1")" = "$2" ] || fail "$3: the mount no longer shows the job's change"
  echo more >> "$P/pkg/more.txt" || fail "$3: the mount no longer takes writes"
  [ -f "$RECORD" ] || fail "$3: the save record is gone"
}
# Closes the holder and retries: the unmount must go through (stdout matching PATTERN), and
# the record goes with it.
retry_unmount() {  # retry_unmount PATTERN CASE
  stop_holder
  "$LC" unmount --save "$P" > "$W/out" 2> "$W/err" || fail "$2: retry: $(cat "$W/out" "$W/err")"
  grep -q "$1" "$W/out" || fail "$2: retry: $(cat "$W/out")"
  mountpoint -q "$P" && fail "$2: still mounted after the retry"
  [ -f "$RECORD" ] && fail "$2: the save record outlived the unmount"
  true
}

mkdir -p "$P/pkg"
seq 1 1000 > "$P/pkg/base.txt"
"$LC" save --key deps-v1 "$P" > /dev/null
rm -rf "$P" && mkdir -p "$P"

# 1. Busy before the save.
"$LC" mount --key deps-v2 --restore-keys deps- "$P" > /dev/null
echo "job change" > "$P/pkg/new.txt"
sleep 600 < "$P/pkg/base.txt" &
HOLDER=$!
for _ in $(seq 1 100); do [ -n "$(fuser -m "$P" 2>/dev/null)" ] && break; sleep 0.05; done
rc=0
"$LC" unmount --save "$P" > "$W/out" 2> "$W/err" || rc=$?
[ "$rc" = 1 ] || fail "busy unmount --save exited $rc, want 1: $(cat "$W/out" "$W/err")"
grep -q "$P is busy" "$W/err" || fail "the error must name the busy path: $(cat "$W/err")"
grep -q "pid $HOLDER (sleep)" "$W/err" || fail "the error must name the holder: $(cat "$W/err")"
grep -q "fuser -vm $P" "$W/err" || fail "the error must say how to find the holder: $(cat "$W/err")"
grep -q "nothing was saved" "$W/err" || fail "the error must say nothing was saved: $(cat "$W/err")"
[ -f "$(entry_file deps-v2)" ] && fail "a busy unmount --save must not save"
kept_mounted pkg/new.txt "job change" "busy before the save"
retry_unmount "saved .* as key deps-v2" "busy before the save"
[ "$(saved_file deps-v2 pkg/new.txt)" = "job change" ] || fail "the saved entry lacks the job's change"
[ "$(saved_file deps-v2 pkg/more.txt)" = "more" ] || fail "the saved entry lacks the write made after the busy unmount"

# 2. A file opened after the busy check, while the save runs: 60 MB of incompressible data take
#    long enough to compress and copy for the holder to open a file first.
"$LC" mount --key deps-v3 --restore-keys deps- "$P" > /dev/null
head -c 60000000 /dev/urandom > "$P/pkg/big.bin"
echo "race change" > "$P/pkg/race.txt"
"$LC" unmount --save "$P" > "$W/out" 2> "$W/err" &
SAVER=$!
for _ in $(seq 1 400); do [ -n "$(ls -A "$W/store/.lazycache-tmp" 2>/dev/null)" ] && break; sleep 0.02; done
sleep 600 < "$P/pkg/base.txt" &
HOLDER=$!
rc=0
wait $SAVER || rc=$?
[ "$rc" = 1 ] || fail "unmount with a file opened during the save exited $rc, want 1: $(cat "$W/out" "$W/err")"
grep -q "saved .* as key deps-v3" "$W/out" || fail "the save before the busy unmount: $(cat "$W/out" "$W/err")"
grep -q "stays mounted with its changes and its save record" "$W/err" || fail "busy after the save: $(cat "$W/err")"
grep -q "fuser -vm $P" "$W/err" || fail "busy after the save must say how to find the holder: $(cat "$W/err")"
kept_mounted pkg/race.txt "race change" "opened during the save"
retry_unmount "already exists" "opened during the save"
[ "$(saved_file deps-v3 pkg/race.txt)" = "race change" ] || fail "the saved entry lacks the job's change"

# 3. A failed save keeps everything. The fill brings the whole base first (frames_pending 0 in
#    `status --json`), so the writes kept_mounted makes need nothing from the broken store: on a
#    loaded machine the mount returned before the fill had pkg/more.txt (CI, 2026-12-03).
"$LC" mount --key deps-v4 --restore-keys deps- "$P" > /dev/null
for _ in $(seq 1 600); do
  [ "$("$LC" status --json "$P" | grep -o '"frames_pending":[0-9]*' | head -n 1 | cut -d: -f2)" = 0 ] && break
  sleep 0.05
done
echo "kept" > "$P/pkg/kept.txt"
mv "$W/store" "$W/store.away" && echo "not a store" > "$W/store"
rc=0
"$LC" unmount --save "$P" > "$W/out" 2> "$W/err" || rc=$?
[ "$rc" = 1 ] || fail "unmount --save to a broken store exited $rc, want 1: $(cat "$W/out" "$W/err")"
grep -q "$P stays mounted; its changes are kept in" "$W/err" || fail "failed save: $(cat "$W/err")"
kept_mounted pkg/kept.txt "kept" "failed save"
rm "$W/store" && mv "$W/store.away" "$W/store"
retry_unmount "saved .* as key deps-v4" "failed save"
[ "$(saved_file deps-v4 pkg/kept.txt)" = "kept" ] || fail "the saved entry lacks the change kept through the failed save"

echo "OK"
