#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every command's --help is the same for root and for another user with another HOME, and names
# no home directory: the man page is generated from it as root and must be true for every user.
# Usage: help_paths_test.sh path/to/lazycache   (exit 77: not root, or no setpriv)
set -euo pipefail
LC=$(readlink -f "$1")
[ "$(id -u)" = 0 ] && command -v setpriv >/dev/null || { echo "SKIP: needs root and setpriv"; exit 77; }
W=$(mktemp -d /tmp/lc-help-paths.XXXXXX)
chmod 755 "$W"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
helps() {  # all help texts, as the current environment's user
  "$LC" --help
  for c in $("$LC" --help | awk '/^commands:/{f=1;next} f && /^  [a-z]/{print $1} f && /^$/{f=0}'); do "$LC" "$c" --help; done
}
env -i PATH="$PATH" HOME="$W/root-home" LAZYCACHE_CONFIG= bash -c "$(declare -f helps); LC='$LC' helps" > "$W/root.txt" 2>&1
env -i PATH="$PATH" HOME="$W/user-home" XDG_RUNTIME_DIR="$W/xdg" LAZYCACHE_CONFIG= \
  setpriv --reuid=65534 --regid=65534 --clear-groups bash -c "$(declare -f helps); LC='$LC' helps" > "$W/user.txt" 2>&1
[ -s "$W/root.txt" ] || fail "no help output"
diff "$W/root.txt" "$W/user.txt" > "$W/diff" || fail "help differs between root and another user: $(cat "$W/diff")"
! grep -n "$W" "$W/root.txt" || fail "help names this user's home directory"
echo ok
