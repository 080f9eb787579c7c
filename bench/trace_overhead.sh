#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/trace_overhead.sh LAZYCACHE [TREE] [PASSES]: what `lazycache trace` costs a job, as root.
# A job that opens, reads and closes every file of TREE (default: the node fixture's
# node_modules) PASSES times (default 5), timed three ways, each after one untimed warm pass:
#   none     no trace;
#   traced   a trace of a copy of TREE (every open is recorded);
#   elsewhere a trace of an empty directory on the same file system (every open still reaches
#            the tracer, which drops it after resolving its path: what a job pays for the opens
#            of its compiler and tools outside the cached paths).
# Prints one line per way: seconds, opens per second, the events the tracer read (its cost: one
# kernel-opened descriptor and a readlink each) and its list length.
set -euo pipefail
LC=$1 TREE=${2:-${LC_BENCH_FIXTURES:-/work/bench-fixtures}/node/node_modules} PASSES=${3:-5}
W=$(mktemp -d /tmp/lc-trace-cost.XXXXXX)
export LAZYCACHE_RUN_DIR=$W/run
cleanup() { "$LC" trace stop --discard "$W" > /dev/null 2>&1 || true; rm -rf "$W"; }
trap cleanup EXIT
cp -a "$TREE" "$W/tree"
mkdir -p "$W/empty"
find "$W/tree" -type f -print0 > "$W/files"
n=$(tr -cd '\0' < "$W/files" | wc -c)
job() { for _ in $(seq "$PASSES"); do xargs -0 -n 2000 cat < "$W/files" > /dev/null; done; }
job
for way in none traced elsewhere; do
  case $way in
    traced) "$LC" trace start "$W/tree" > /dev/null ;;
    elsewhere) "$LC" trace start "$W/empty" > /dev/null ;;
  esac
  t0=$(date +%s.%N)
  job
  t1=$(date +%s.%N)
  listed=0 events=0
  if [ "$way" != none ]; then
    out=$("$LC" trace stop "$W/tree" "$W/empty")
    listed=$(sed -n 's/.*: \([0-9]*\) files read.*/\1/p' <<<"$out")
    events=$(sed -n 's/.*(\([0-9]*\) events.*/\1/p' <<<"$out")
    "$LC" trace stop --discard "$W/tree" "$W/empty" > /dev/null 2>&1 || true
  fi
  awk -v w="$way" -v a="$t0" -v b="$t1" -v n="$n" -v p="$PASSES" -v l="$listed" -v ev="$events" -v load="$(cut -d' ' -f1 /proc/loadavg)" \
    'BEGIN { printf "%-9s %6.2f s  %8.0f opens/s  %6d events  %6d files listed  (%d files x %d passes, load1 %s)\n", w, b - a, n * p / (b - a), ev, l, n, p, load }'
done
