#!/usr/bin/env bash
# Small CLI edges (issue 18 item 11): save takes -q and has no --restore-keys; counts and sizes
# read as English ("1 file", KiB for small entries); a mistyped LAZYCACHE_* variable is warned
# about, known ones are not. Usage: edges_test.sh path/to/lazycache
set -euo pipefail
LC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
W=$(mktemp -d /tmp/lc-edges.XXXXXX)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export LAZYCACHE_CONFIG='' LAZYCACHE_STORE=file://$W/store LAZYCACHE_RUN_DIR=$W/run
mkdir -p "$W/src/d"
echo hello > "$W/src/d/a"

"$LC" save --key k1 "$W/src/d" > "$W/out" 2> "$W/err"
grep -q ': 1 file, 6 B -> [0-9.]* \(B\|KiB\) in ' "$W/out" || fail "save summary: $(cat "$W/out")"
"$LC" save -q --key k2 "$W/src/d" > "$W/out" 2> "$W/err" || fail "save -q: $(cat "$W/err")"
[ ! -s "$W/out" ] || fail "save -q printed: $(cat "$W/out")"
! "$LC" save --help | grep -q -- '--restore-keys' || fail "save --help lists --restore-keys"
for c in lookup doctor ls; do  # read-only: no upload options in their help
  ! "$LC" $c --help | grep -Eq -- '--(part-size|sign-payload|concurrency)' || fail "$c --help lists upload options"
done
"$LC" save --help | grep -q -- '--part-size' || fail "save --help lacks --part-size"
"$LC" lookup --part-size 8M --concurrency 4 --key k1 > /dev/null || fail "lookup refuses the shared store options"

LAZYCACHE_STOER=s3://typo "$LC" lookup --key k1 > /dev/null 2> "$W/err"
grep -q 'warning: unknown environment variable LAZYCACHE_STOER' "$W/err" || fail "no warning for LAZYCACHE_STOER: $(cat "$W/err")"
"$LC" lookup --key k1 > /dev/null 2> "$W/err"
! grep -q 'unknown environment variable' "$W/err" || fail "a known variable was warned about: $(cat "$W/err")"
echo ok
