#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The late page-cache hand-off (issue 15; docs/mount.md, "Page-cache hand-off"), through real
# mounts of a local-directory store entry, read-only (--read-only) and writable (the default):
# a job reads file A, which decodes the frame A shares with file B; only then does it look up
# and open B. The daemon must hand B's bytes to the kernel's page cache from the frame in memory
# (Filesystem::note_known at the lookup and the open, figure files_to_page_cache_late), so that
# reading B, twice, sends no READ to the daemon (figure requests_read): with keep_cache the
# kernel serves both from the pages it was given. Without the late hand-off the first read of B
# would be a READ.
#
# Nothing may list the directory first (a readdirplus reply would make B known before the
# decode, and the decode itself would hand it off): so the mounts are made with --warm-names off,
# the daemon's own listing of the tree (fs/tree_warmer.h). The daemon drops its in-memory frames after
# 3 s without reads (FilesystemConfig::idle_trim_ms); if a loaded machine stalls that long between
# reading A and opening B, B's frame is gone and nothing can be handed off late. So each mount
# tries up to three pairs (A_i, B_i), each A_i read decoding the frame again if it went, and fails
# only when no pair showed the hand-off: a broken hand-off fails every pair.
# Skipped (exit 0, with a message) when FUSE cannot be used. Usage: late_hand_off_test.sh LAZYCACHE
set -euo pipefail
. "$(dirname "$0")/cli_test_lib.sh"
cli_test_setup "$1" lc-late-hand-off

# A number from `lazycache status --json` of $P ("key":N).
figure() {
  local n
  n=$("$LC" status --json "$P" | grep -o "\"$1\":[0-9]*" | head -n 1 | cut -d: -f2)
  [ -n "$n" ] || fail "status --json of $P has no figure $1"
  echo "$n"
}

# Small files, all in the archive's one 4 MiB frame: a_i.txt and b_i.txt lie wholly inside it.
mkdir -p "$P/pkg"
for i in 0 1 2; do
  seq 1 2000 | sed "s/^/a$i /" > "$P/pkg/a$i.txt"
  seq 1 3000 | sed "s/^/b$i /" > "$P/pkg/b$i.txt"
done
cp -a "$P" "$W/plain"
"$LC" save --key late-v1 "$P" > /dev/null
rm -rf "$P" && mkdir -p "$P"

# One pair: read A, open B, wait for B's hand-off, then read B twice. Returns 1 (with a
# message on stderr) when B was not handed off late.
try_pair() {  # try_pair I CASE
  local i=$1 case=$2 late_before late reads_before reads_after
  late_before=$(figure files_to_page_cache_late)
  cmp -s "$P/pkg/a$i.txt" "$W/plain/pkg/a$i.txt" || fail "$case: a$i.txt differs"
  exec 3< "$P/pkg/b$i.txt"  # LOOKUP and OPEN of B: each offers it late
  for _ in $(seq 1 50); do  # 5 s and more: the hand-off takes milliseconds
    late=$(figure files_to_page_cache_late)
    [ "$late" -gt "$late_before" ] && break
    sleep 0.1
  done
  if [ "$late" -le "$late_before" ]; then
    exec 3<&-
    echo "$case: pair $i: b$i.txt was not handed off late (files_to_page_cache_late stayed $late)" >&2
    return 1
  fi
  reads_before=$(figure requests_read)
  cmp -s - "$W/plain/pkg/b$i.txt" <&3 || fail "$case: b$i.txt read through the open descriptor differs"
  exec 3<&-
  cmp -s "$P/pkg/b$i.txt" "$W/plain/pkg/b$i.txt" || fail "$case: b$i.txt read again differs"
  reads_after=$(figure requests_read)
  [ "$reads_after" = "$reads_before" ] ||
    fail "$case: reading b$i.txt twice after its late hand-off sent $((reads_after - reads_before)) READs to the daemon, want 0"
  echo "$case: pair $i: b$i.txt handed off late, read twice with no READ"
}

check_mount() {  # check_mount CASE MOUNT-OPTIONS...
  local case=$1 i
  shift
  "$LC" mount --key late-v1 --warm-names off "$@" "$P" > /dev/null
  local ok=
  for i in 0 1 2; do
    if try_pair "$i" "$case"; then ok=1; break; fi
  done
  [ "$(figure read_errors)" = 0 ] || fail "$case: read errors"
  "$LC" unmount "$P" > /dev/null
  [ -n "$ok" ] || fail "$case: no pair was handed off late"
}

check_mount read-only --read-only
rm -rf "$LAZYCACHE_CACHE_DIR"  # the writable mount decodes from the store again, as a first run
check_mount writable
echo "PASS"
