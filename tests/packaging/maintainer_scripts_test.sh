#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The .deb's maintainer scripts (issue 18 item 8), run directly (no package install), real FUSE:
#  - prerm upgrade leaves mounts alone (running daemons keep their binary);
#  - prerm remove detaches the mounts of daemons running the package binary and stops them (by
#    the pid in their state file), and leaves a daemon of another binary alone;
#  - postrm purge keeps /var/cache/lazycache (the user's caches) unless LAZYCACHE_PURGE_DATA=yes,
#    and removes /run/lazycache once no daemon runs (paths under DPKG_ROOT here).
# Usage: maintainer_scripts_test.sh path/to/lazycache   (exit 77: FUSE not usable here)
set -euo pipefail
LC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SRC=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d /tmp/lc-maint.XXXXXX)
cleanup() {
  for m in $(awk -v w="$W" '$2 ~ "^"w {print $2}' /proc/mounts); do umount -l "$m" || true; done
  rm -rf "$W"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
"$LC" doctor --json --no-store-check >/dev/null 2>&1 || { echo "SKIP: FUSE is not usable here"; exit 77; }
export LAZYCACHE_RUN_DIR=$W/run LAZYCACHE_CACHE_DIR=$W/chunks LAZYCACHE_CONFIG='' LAZYCACHE_STORE=$W/store
mounted() { awk -v m="$1" '$2 == m && ($3 == "fuse.lazycache" || ($3 == "overlay" && $1 == "lazycache")) {f = 1} END {exit !f}' /proc/mounts; }
pid_of() { sed -n 's/^pid=//p' "$(grep -l "^mountpoint=$1\$" "$W"/run*/mount-*.state)"; }
gone() { for _ in $(seq 600); do [ -d "/proc/$1" ] || return 0; sleep 0.1; done; return 1; }
mkdir -p "$W/src"
echo hello > "$W/src/f"
"$LC" save -q --key k "$W/src"
"$LC" mount --any-paths --key k "$W/pkg" > /dev/null
# Another build's daemon (a copy of the binary elsewhere), in its own run directory.
cp "$LC" "$W/other-lazycache"
LAZYCACHE_RUN_DIR=$W/run2 "$W/other-lazycache" mount --any-paths --key k "$W/other" > /dev/null
mounted "$W/pkg" && mounted "$W/other" || fail "the mounts did not start"
P1=$(pid_of "$W/pkg"); P2=$(pid_of "$W/other")

LAZYCACHE_BIN=$LC sh "$SRC/packaging/deb/prerm" upgrade
mounted "$W/pkg" || fail "prerm upgrade unmounted"
LAZYCACHE_BIN=$LC sh "$SRC/packaging/deb/prerm" remove > "$W/out" 2>&1 || fail "prerm remove failed: $(cat "$W/out")"
grep -q "stopped mount daemon $P1" "$W/out" || fail "prerm said: $(cat "$W/out")"
! mounted "$W/pkg" || fail "prerm remove left $W/pkg mounted"
gone "$P1" || fail "daemon $P1 still runs after prerm remove"
mounted "$W/other" || fail "prerm remove unmounted another binary's mount"
[ -d "/proc/$P2" ] || fail "prerm remove stopped another binary's daemon"
LAZYCACHE_RUN_DIR=$W/run2 "$W/other-lazycache" unmount "$W/other" > /dev/null 2>&1

R=$W/root
mkdir -p "$R/var/cache/lazycache/store" "$R/run/lazycache"
echo entry > "$R/var/cache/lazycache/store/k.tar.zst"
printf 'pid=%s\nstate=stopped\n' 999999999 > "$R/run/lazycache/mount-999999999.state"
DPKG_ROOT=$R sh "$SRC/packaging/deb/postrm" remove
[ -d "$R/run/lazycache" ] || fail "postrm remove removed the run directory"
DPKG_ROOT=$R sh "$SRC/packaging/deb/postrm" purge > "$W/out"
[ -f "$R/var/cache/lazycache/store/k.tar.zst" ] || fail "purge removed the caches without LAZYCACHE_PURGE_DATA=yes"
grep -q 'kept the caches' "$W/out" || fail "purge did not say it kept the caches: $(cat "$W/out")"
[ ! -e "$R/run/lazycache" ] || fail "purge left the run directory"
DPKG_ROOT=$R LAZYCACHE_PURGE_DATA=yes sh "$SRC/packaging/deb/postrm" purge > /dev/null
[ ! -e "$R/var/cache/lazycache" ] || fail "purge with LAZYCACHE_PURGE_DATA=yes left the caches"
echo ok
