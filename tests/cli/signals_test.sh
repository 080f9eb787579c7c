#!/usr/bin/env bash
# Ctrl-C and SIGTERM while a command waits on a store that accepts connections and never answers
# (issue 18 item 4): every command stops within a second, says it was interrupted, exits 128 +
# signal (130 for SIGINT), and leaves no daemon, mount or state file behind. And a store that
# keeps answering 503 makes the retries say what they retry.
# Usage: signals_test.sh path/to/lazycache
set -euo pipefail
set -m  # background jobs get their own process group and keep SIGINT (not ignored)
LC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d /tmp/lc-signals.XXXXXX)
STORE_PIDS=()
cleanup() {
  for p in "${STORE_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for m in $(awk -v w="$W" '$2 ~ "^"w {print $2}' /proc/mounts); do umount -l "$m" 2>/dev/null || true; done
  # A daemon this test started and did not stop (a failure): found by its run directory.
  for e in /proc/[0-9]*/environ; do
    if grep -qz "^LAZYCACHE_RUN_DIR=$W/run$" "$e" 2>/dev/null; then p=${e#/proc/}; kill -9 "${p%/environ}" 2>/dev/null || true; fi
  done
  rm -rf "$W"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for mode in silent busy; do
  python3 "$HERE/stuck_store.py" "$mode" "$W/port.$mode" </dev/null >/dev/null 2>&1 &
  STORE_PIDS+=($!)
  disown $!
done
for mode in silent busy; do
  for _ in $(seq 200); do [ -s "$W/port.$mode" ] && break; sleep 0.05; done
  [ -s "$W/port.$mode" ] || fail "stuck_store.py $mode did not start"
done
SILENT=$(cat "$W/port.silent")
BUSY=$(cat "$W/port.busy")
export LAZYCACHE_RUN_DIR=$W/run LAZYCACHE_CACHE_DIR=$W/chunks LAZYCACHE_CONFIG='' LAZYCACHE_STORE=
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
S3=(--store s3://bucket/prefix --endpoint "http://127.0.0.1:$SILENT")
mkdir -p "$W/src"
echo hello > "$W/src/hello.txt"

# interrupt SIGNAL WANT_CODE NAME CMD...: starts CMD, waits 1.5 s (it must still be waiting on
# the store), sends SIGNAL, and checks it ends within a second with WANT_CODE and says why.
interrupt() {
  local sig=$1 want=$2 name=$3; shift 3
  "$@" >"$W/out" 2>"$W/err" &
  local pid=$!
  sleep 1.5
  kill -0 "$pid" 2>/dev/null || { cat "$W/err" >&2; fail "$name ended before the signal (it should wait on the silent store)"; }
  local t0; t0=$(date +%s%N)
  kill -"$sig" "$pid"
  local rc=0
  wait "$pid" || rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  [ "$rc" = "$want" ] || { cat "$W/err" >&2; fail "$name after SIG$sig exited $rc, expected $want"; }
  [ "$ms" -lt 1000 ] || fail "$name took $ms ms to stop after SIG$sig"
  grep -q "interrupted by SIG$sig" "$W/err" || { cat "$W/err" >&2; fail "$name does not say it was interrupted"; }
  echo "ok: $name stopped $ms ms after SIG$sig (exit $rc)"
}

interrupt INT 130 "mount (daemon startup)" "$LC" mount "${S3[@]}" --key k "$W/m1"
interrupt TERM 143 "mount --foreground" "$LC" mount --foreground "${S3[@]}" --key k "$W/m2"
interrupt INT 130 "restore --extract" "$LC" restore --extract "${S3[@]}" --key k "$W/r1"
interrupt INT 130 "restore (mount mode)" "$LC" restore "${S3[@]}" --key k "$W/r2"
interrupt INT 130 "save" "$LC" save "${S3[@]}" --key k "$W/src"
interrupt TERM 143 "lookup" "$LC" lookup "${S3[@]}" --key k

# Nothing left behind: no daemon (cleanup would find it, but say so here), no mount, no state.
for e in /proc/[0-9]*/environ; do
  grep -qz "^LAZYCACHE_RUN_DIR=$W/run$" "$e" 2>/dev/null && fail "a lazycache process outlived its interrupt: ${e%/environ}"
done
! grep -q " $W/" /proc/mounts || fail "a mount is left: $(grep " $W/" /proc/mounts)"
! ls "$W"/run/*.state >/dev/null 2>&1 || fail "a state file is left: $(ls "$W"/run)"

# Retries say what they retry (a store answering 503 SlowDown every time).
set +e
"$LC" lookup --store s3://bucket/prefix --endpoint "http://127.0.0.1:$BUSY" --retries 3 --key k >"$W/out" 2>"$W/err"
rc=$?
set -e
[ "$rc" = 1 ] || { cat "$W/err" >&2; fail "lookup against a 503 store exited $rc"; }
# Per request: a lookup without PATHs lists the key's versions first, then asks for its name.
n=$(grep -c 'HEAD k.*retrying' "$W/err" || true)
[ "$n" = 2 ] || { cat "$W/err" >&2; fail "3 attempts of the HEAD should print 2 retry lines, got $n"; }
n=$(grep -c 'retrying' "$W/err" || true)
[ "$n" = 2 ] || [ "$n" = 4 ] || { cat "$W/err" >&2; fail "3 attempts per request should print 2 retry lines each, got $n"; }
grep -q 'LIST\|HEAD\|GET' "$W/err" || fail "the retry lines do not name the request"
echo "ok"
