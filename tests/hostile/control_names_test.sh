#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/hostile/control_names_test.sh LAZYCACHE LC_MAKE_CONTROL_NAMES: an archive whose names,
# root path, symlink target, xattr name and tool version hold ESC sequences, BEL, newlines and a
# C1 CSI (tests/hostile/make_control_names_main.cpp). `ls`, `ls -l`, `info`, `extract` and
# `mount` (its output, `status` and the daemon log) must print them quoted: no raw control
# byte in any output, and no line drawn by a name ("lazycache: FAKE ..." at a line start).
set -u
cli=$(realpath "$1"); gen=$2
tmp=$(mktemp -d /tmp/lc-control-names-XXXXXX)
mnt=$tmp/mnt
export LAZYCACHE_RUN_DIR=$tmp/run
cleanup() {
  if grep -qF " $mnt " /proc/mounts; then "$cli" unmount "$mnt" >/dev/null 2>&1 || fusermount3 -u -z "$mnt"; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
"$gen" "$tmp/names.tar.zst" || { echo "lc-make-control-names failed"; exit 1; }
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
check_output() {  # WHAT TEXT [MUST_CONTAIN]
  local what=$1 text=$2 want=${3:-}
  if LC_ALL=C grep -q '[[:cntrl:]]' <<<"$text"; then fail "$what: a raw control byte: $(printf '%q' "$text")"; fi
  if LC_ALL=C grep -q $'\xc2[\x80-\x9f]' <<<"$text"; then fail "$what: a raw C1 control: $(printf '%q' "$text")"; fi
  if grep -q '^lazycache: FAKE' <<<"$text"; then fail "$what: a name drew a line of its own: $(printf '%q' "$text")"; fi
  if [ -n "$want" ] && ! grep -qF -- "$want" <<<"$text"; then fail "$what: lacks $want: $(printf '%q' "$text")"; fi
}
run() {  # WHAT CMD...: runs, expects exit 0, checks stdout+stderr
  local what=$1; shift
  local out rc
  out=$(timeout 60 "$cli" "$@" 2>&1); rc=$?
  [ $rc -eq 0 ] || fail "$what: exit $rc: $(printf '%q' "$out")"
  check_output "$what" "$out" "${want:-}"
}
want="'data/dir\\x1b[2J/file\\nlazycache: FAKE name line'" run "ls" ls "$tmp/names.tar.zst"
want="-> 'target\\x1b[0m\\nlazycache: FAKE target line'" run "ls -l" ls -l "$tmp/names.tar.zst"
want="root\\nlazycache: FAKE root line/data'" run "info" info "$tmp/names.tar.zst"
want="" run "extract" extract -C "$tmp/out" "$tmp/names.tar.zst"
out=$("$cli" ls "$tmp/names.tar.zst" "no$(printf '\033')such" 2>&1)
check_output "ls of a missing path" "$out" "'no\\x1bsuch'"

if [ -e /dev/fuse ] && command -v fusermount3 >/dev/null; then
  mkdir -p "$mnt"
  # Two paths for one root: the refusal lists the saved root paths, which come from the archive.
  out=$(timeout 60 "$cli" mount --archive "$tmp/names.tar.zst" --cache-dir "$tmp/cache" "$mnt" "$tmp/mnt2" 2>&1) &&
    fail "mount with two paths for one root exited 0"
  check_output "mount's refusal" "$out" "root\\nlazycache: FAKE root line/data'"
  want="" run "mount" mount --archive "$tmp/names.tar.zst" --cache-dir "$tmp/cache" "$mnt"
  cat "$mnt/dir"$'\033'"[2J/file"$'\n'"lazycache: FAKE name line" >/dev/null 2>&1 || fail "reading through the mount"
  want="" run "status" status
  "$cli" unmount "$mnt" >/dev/null 2>&1 || fail "unmount"
  for log in "$LAZYCACHE_RUN_DIR"/mount-*.log; do
    [ -e "$log" ] && check_output "daemon log" "$(cat "$log")"
  done
else
  echo "no FUSE here: the mount part is skipped"
fi
echo "$fails failures"
[ $fails -eq 0 ]
