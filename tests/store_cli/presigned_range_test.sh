#!/usr/bin/env bash
# A presigned GET URL on a server that answers "Range: bytes=0-0" with 200 (s3rver) and refuses
# HEAD (issue 18 item 12): restore works and sends no HEAD, and a lookup's size comes from the
# bytes=0-0 GET's headers. Usage: presigned_range_test.sh LAZYCACHE
set -euo pipefail
LC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d /tmp/lc-presigned.XXXXXX)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export LAZYCACHE_CONFIG='' LAZYCACHE_RUN_DIR=$W/run LAZYCACHE_CACHE_DIR=$W/chunks
mkdir -p "$W/src/d"
seq 1 200000 > "$W/src/d/numbers.txt"
(cd "$W/src" && "$LC" pack -q -o "$W/entry.tar.zst" d)
python3 "$HERE/range_ignoring_origin.py" "$W/entry.tar.zst" "$W/port" "$W/log" </dev/null >/dev/null 2>&1 &
PID=$!
for _ in $(seq 200); do [ -s "$W/port" ] && break; sleep 0.05; done
URL="http://127.0.0.1:$(cat "$W/port")/bucket/entry.tar.zst?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=abc"
"$LC" restore --extract --store "$URL" --key anything "$W/out" > "$W/stdout" 2> "$W/err" || { cat "$W/err" >&2; fail "restore from the presigned URL"; }
cmp "$W/src/d/numbers.txt" "$W/out/numbers.txt" || fail "restored content differs"
! grep -q '^HEAD' "$W/log" || fail "a HEAD was sent (a presigned URL is GET-only): $(cat "$W/log")"
# An exact key's restore looks the entry up with a suffix-range GET of its tail (size from
# Content-Range); a lookup alone asks for bytes=0-0, which this server answers with 200 and the
# whole object: the size then comes from Content-Length, still without a HEAD.
grep -q '^GET bytes=-[0-9]* 206' "$W/log" || fail "restore did not look the entry up with a tail read: $(cat "$W/log")"
: > "$W/log"
"$LC" lookup --store "$URL" --key anything "$W/out" > "$W/lookup.out" 2>&1 || { cat "$W/lookup.out" >&2; fail "lookup from the presigned URL"; }
grep -q "$(stat -c %s "$W/entry.tar.zst") bytes" "$W/lookup.out" || fail "lookup did not give the entry's size: $(cat "$W/lookup.out")"
! grep -q '^HEAD' "$W/log" || fail "lookup sent a HEAD (a presigned URL is GET-only): $(cat "$W/log")"
grep -q '^GET bytes=0-0 200' "$W/log" || fail "the test origin did not answer bytes=0-0 with 200: $(cat "$W/log")"
echo ok
