#!/usr/bin/env bash
# Progress in a CI log (issue 18 item 6): with stderr not a terminal, save, restore --extract and
# unmount --save print a line every LAZYCACHE_PROGRESS_INTERVAL seconds (5 by default; 0.2 here)
# with bytes, total, %, rate and ETA; -q/--json do not change that stdout holds only the result;
# a short command prints none. Usage: progress_test.sh path/to/lazycache
set -euo pipefail
LC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
W=$(mktemp -d /tmp/lc-progress.XXXXXX)
cleanup() {
  for m in $(awk -v w="$W" '$2 ~ "^"w {print $2}' /proc/mounts); do "$LC" unmount --lazy "$m" >/dev/null 2>&1 || umount -l "$m" || true; done
  rm -rf "$W"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export LAZYCACHE_RUN_DIR=$W/run LAZYCACHE_CACHE_DIR=$W/chunks LAZYCACHE_CONFIG='' LAZYCACHE_STORE=file://$W/store
LINE='^lazycache [a-z -]+: [0-9.]+ [KMG]?i?B of [0-9.]+ [KMG]?i?B \([0-9]+%\), [0-9.]+ [KMG]?i?B/s(, ETA [0-9]+ s)?; files [0-9]+/[0-9]+'
mkdir -p "$W/src/d"
for i in $(seq 1 12); do head -c 2000000 /dev/urandom > "$W/src/d/f$i"; done   # 24 MB that does not compress

LAZYCACHE_PROGRESS_INTERVAL=0.1 "$LC" save --threads 1 --level 19 --key k "$W/src/d" > "$W/out" 2> "$W/err"
n=$(grep -Ec "^lazycache save: " "$W/err" || true)
[ "$n" -ge 2 ] || { cat "$W/err" >&2; fail "save printed $n progress lines, expected several"; }
grep -Eq "$LINE; uploaded " "$W/err" || { cat "$W/err" >&2; fail "a save progress line lacks bytes/total/%/rate/files"; }
grep -q '^saved key k' "$W/out" || fail "the summary is not on stdout"
! grep -q $'\r' "$W/err" || fail "a log got a terminal bar (carriage return)"

LAZYCACHE_PROGRESS_INTERVAL=0.001 "$LC" restore --extract --any-paths --key k "$W/dest" > "$W/out" 2> "$W/err"
grep -Eq "^lazycache restore: .* of 22.9 MiB" "$W/err" || { cat "$W/err" >&2; fail "restore --extract printed no progress line"; }
cmp "$W/src/d/f7" "$W/dest/f7" || fail "restore content"

# unmount --save of a miss directory (the whole view is packed).
"$LC" mount --key k2 "$W/m" > /dev/null
cp -r "$W/src/d/." "$W/m/"
LAZYCACHE_PROGRESS_INTERVAL=0.001 "$LC" unmount --save "$W/m" > "$W/out" 2> "$W/err" || { cat "$W/err" >&2; fail "unmount --save"; }
grep -Eq "^lazycache unmount --save: .* of 22.9 MiB" "$W/err" || { cat "$W/err" >&2; fail "unmount --save printed no progress line"; }

# The default interval (5 s) prints nothing for a short save; LAZYCACHE_PROGRESS_INTERVAL=0 never.
"$LC" save --key k3 "$W/src/d/f1" > /dev/null 2> "$W/err"
! grep -q '^lazycache save: ' "$W/err" || fail "a short save printed progress"
echo ok
