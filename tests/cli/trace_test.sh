#!/usr/bin/env bash
# `lazycache trace` (issue 17 items 5-6): on a plain directory, the files a job reads are
# recorded in first-read order (cat, a python import, a .so loaded with dlopen/mmap), reads
# outside the traced path are not, and files the job wrote take their place at their first read
# after the write; `save` stops the trace and lays those files out first (the tar order of the
# entry) as the index hot list; without CAP_SYS_ADMIN `trace start` says so once, exits 0, and the
# save has no hot list. No FUSE. Usage: trace_test.sh path/to/lazycache
set -euo pipefail
LC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
W=$(mktemp -d /tmp/lc-trace.XXXXXX)
cleanup() {
  for f in "$W"/run/trace-*.info; do
    [ -e "$f" ] || continue
    pid=$(sed -n 's/^pid=//p' "$f")
    grep -q '^state=running' "$f" && kill "$pid" 2>/dev/null || true
  done
  rm -rf "$W"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export LAZYCACHE_RUN_DIR=$W/run LAZYCACHE_CACHE_DIR=$W/chunks LAZYCACHE_CONFIG='' LAZYCACHE_STORE=file://$W/store
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
"$LC" trace start "$W" > "$W/out" 2>&1 || true
if grep -q '^lazycache trace: not tracing' "$W/out"; then echo "SKIP: fanotify is not usable here: $(cat "$W/out")"; exit 77; fi
grep -q '^tracing' "$W/out" || fail "trace start: $(cat "$W/out")"
"$LC" trace stop --discard "$W" > /dev/null

D=$W/job/deps O=$W/outside
mkdir -p "$D/pkg" "$D/lib" "$O"
for f in a b unread1 unread2; do echo "$f" > "$D/$f.txt"; done
echo 'VALUE = 42' > "$D/pkg/mod.py"
cp /lib/x86_64-linux-gnu/libz.so.1 "$D/lib/libz.so" 2>/dev/null || cp "$(ldd "$LC" | awk '/libz\.so/ {print $3}')" "$D/lib/libz.so"
echo outside > "$O/o.txt"
# Files the save finds before the hot ones in bytewise order, so the layout check means something.
echo early > "$D/0early.txt"

"$LC" trace start "$D" > "$W/out"
grep -q "^tracing reads under $D (tracer pid [0-9]*)" "$W/out" || fail "trace start: $(cat "$W/out")"
cat "$D/b.txt" > /dev/null
cat "$O/o.txt" > /dev/null                       # outside the traced path: not recorded
echo generated > "$D/gen.txt"                     # written: listed only at its first read
"$PY" -B -c "import sys; sys.path.insert(0, '$D/pkg'); import mod; assert mod.VALUE == 42"
"$PY" -c "import ctypes; ctypes.CDLL('$D/lib/libz.so')"
cat "$D/a.txt" "$D/gen.txt" > /dev/null
echo more >> "$D/b.txt"                           # read, then written: moves to its next read
cat "$D/b.txt" > /dev/null
"$LC" trace stop "$D" > "$W/out"
grep -q "^stopped tracer [0-9]* of $D: 5 files read, in " "$W/out" || fail "trace stop: $(cat "$W/out")"
list=$(sed -n 's/.*files read, in \([^ ]*\) (.*/\1/p' "$W/out")
printf '%s\n' "$D/pkg/mod.py" "$D/lib/libz.so" "$D/a.txt" "$D/gen.txt" "$D/b.txt" > "$W/want"
diff "$W/want" "$list" || fail "the trace's order"

# save takes the stopped trace: those files first in the archive, and as its hot list.
"$LC" save --key k1 "$D" > "$W/out"
grep -q "; 5 traced files first$" "$W/out" || fail "save did not use the trace: $(cat "$W/out")"
[ ! -e "$list" ] || fail "the save left the trace's list behind"
entry=$(find "$W/store" -type f -name '*k1*')
[ -n "$entry" ] || entry=$(find "$W/store" -type f | sed -n 1p)
zstd -dcq "$entry" | tar -tv | awk '$1 ~ /^-/ {print "/" $NF}' | sed -n 1,5p > "$W/layout"
diff "$W/want" "$W/layout" || fail "the archive does not lay the traced files out first"
"$LC" info "$entry" | grep -q '^hot list: *5 files$' || fail "hot list: $("$LC" info "$entry" | grep hot)"

# A running trace: save stops it (its reads go into the list, save's own do not) and ends it.
"$LC" trace start "$D" > "$W/out"
pid=$(sed -n 's/.*tracer pid \([0-9]*\).*/\1/p' "$W/out")
cat "$D/unread2.txt" > /dev/null
"$LC" save --key k2 "$D" > "$W/out"
grep -q "; 1 traced files first$" "$W/out" || fail "save of a running trace: $(cat "$W/out")"
# Gone, or a zombie where PID 1 does not reap (containers).
{ [ ! -e "/proc/$pid/status" ] || grep -q '^State:.*Z' "/proc/$pid/status"; } || fail "the tracer still runs after the save"
[ -z "$(ls "$W/run" | grep '^trace-.*\.\(info\|list\)$' || true)" ] || fail "trace files left: $(ls "$W/run")"
# --no-trace: the trace is left alone.
"$LC" trace start "$D" > /dev/null
cat "$D/a.txt" > /dev/null
"$LC" save --no-trace --key k3 "$D" > "$W/out"
! grep -q "traced" "$W/out" || fail "save --no-trace used the trace"
"$LC" trace stop --discard "$D" | grep -q "discarded" || fail "trace stop --discard"

# A tracer nobody can stop (its run directory removed, as a runner removes RUNNER_TEMP after a
# job) ends by itself within seconds instead of watching every open until the machine stops.
LAZYCACHE_RUN_DIR=$W/run-orphan "$LC" trace start "$D" > "$W/out"
pid=$(sed -n 's/.*tracer pid \([0-9]*\).*/\1/p' "$W/out")
[ -n "$pid" ] || fail "no tracer pid: $(cat "$W/out")"
rm -rf "$W/run-orphan"
for _ in $(seq 1 100); do { [ ! -e "/proc/$pid/status" ] || grep -q '^State:.*Z' "/proc/$pid/status"; } && break; sleep 0.1; done
{ [ ! -e "/proc/$pid/status" ] || grep -q '^State:.*Z' "/proc/$pid/status"; } || { kill "$pid"; fail "the tracer outlived its run directory by 10 s"; }

# Without CAP_SYS_ADMIN: one message, exit 0, and a save without a hot list, silent about it.
setpriv --bounding-set=-sys_admin "$LC" trace start "$D" > "$W/out" 2> "$W/err" || fail "trace start without the permission failed"
[ "$(wc -l < "$W/err")" -eq 1 ] && grep -q "^lazycache trace: not tracing $D: .*CAP_SYS_ADMIN.*no hot list" "$W/err" || fail "message: $(cat "$W/err")"
setpriv --bounding-set=-sys_admin "$LC" save --key k4 "$D" > "$W/out" 2> "$W/err" || fail "save after a refused trace"
[ ! -s "$W/err" ] && ! grep -q traced "$W/out" || fail "save after a refused trace: $(cat "$W/out" "$W/err")"
echo ok
