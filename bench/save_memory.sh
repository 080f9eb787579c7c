#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/save_memory.sh LAZYCACHE [WORKDIR]
# Saves a generated 1 GiB tree to Swift s3api with 8 MiB parts and reports what the save used:
#   - peak RSS of the lazycache process (VmHWM, read from /proc/PID/status just before it exits,
#     and /usr/bin/time -v's maximum resident set size when GNU time is present);
#   - the most TCP connections it held to the store's port at one moment (polled from `ss -tnp`
#     every 20 ms: a lower bound, short-lived peaks can fall between polls) and the most requests
#     in flight at once, which the save itself counts and prints ("up to N at once");
#   - wall time, archive size, and the bound the design promises:
#     (concurrency + 1) x part size + the 8 MiB upload pipe + the compressor's frames in flight.
# The tree: half incompressible (random files of 1-16 MiB), half compressible (base64 text and
# repetitive logs in many smaller files); generated from /dev/urandom in a few seconds and kept in
# WORKDIR/tree between runs.
# Store: the one in S3_ENV_FILE (an env file from tests/servers/swift-s3.sh), else a private Swift
# started in WORKDIR/swift on SWIFT_PORT (default 48580) and stopped at the end (by PID).
# Env: CONCURRENCY (4), PART_SIZE (8M), SIZE_MIB (1024), THREADS (pack threads, 0 = one per CPU).
# Output: a markdown table on stdout, and one TSV line (prefixed "TSV\t") for bench/RESULTS.md.
set -euo pipefail
LC=${1:?usage: save_memory.sh LAZYCACHE [WORKDIR]}
LC=$(cd "$(dirname "$LC")" && pwd)/$(basename "$LC")
W=${2:-/tmp/lc-save-memory}
HERE=$(cd "$(dirname "$0")" && pwd)
CONCURRENCY=${CONCURRENCY:-4}
PART_SIZE=${PART_SIZE:-8M}
SIZE_MIB=${SIZE_MIB:-1024}
THREADS=${THREADS:-0}
mkdir -p "$W"
W=$(cd "$W" && pwd)
started_swift=
cleanup() {
  [ -n "${poll_pid:-}" ] && kill "$poll_pid" 2>/dev/null
  [ -n "$started_swift" ] && "$HERE/../tests/servers/swift-s3.sh" stop "$W/swift" >/dev/null 2>&1
  return 0
}
trap cleanup EXIT

# 1. The tree (reused when it has the requested size).
T=$W/tree
if [ "$(cat "$W/tree.stamp" 2>/dev/null)" != "$SIZE_MIB" ]; then
  rm -rf "$T" "$W/tree.stamp"
  mkdir -p "$T/bin" "$T/text" "$T/logs"
  half=$((SIZE_MIB / 2))
  done_mib=0; i=0
  while [ $done_mib -lt "$half" ]; do   # incompressible: 1..16 MiB files
    n=$(( (i * 7) % 16 + 1 )); [ $((done_mib + n)) -gt "$half" ] && n=$((half - done_mib))
    head -c $((n << 20)) /dev/urandom > "$T/bin/blob-$i.bin"
    done_mib=$((done_mib + n)); i=$((i + 1))
  done
  # compressible: base64 text (about 3:4) in 256 KiB files, and repetitive logs (very high ratio)
  text_mib=$(( (SIZE_MIB - half) * 3 / 4 )); log_mib=$((SIZE_MIB - half - text_mib))
  head -c $((text_mib * 3 << 18)) /dev/urandom | base64 -w 120 | split -b 256K -a 5 - "$T/text/part-"
  for j in $(seq 1 "$log_mib"); do
    mkdir -p "$T/logs/d$((j % 32))"
    { yes "2026-11-30T02:00:00Z build step $j: compiling module with flags -O2 -g -Wall" || true; } | head -c 1048576 > "$T/logs/d$((j % 32))/log-$j.txt"
  done
  echo "$SIZE_MIB" > "$W/tree.stamp"
fi
tree_bytes=$(du -sb "$T" | cut -f1)
tree_files=$(find "$T" -type f | wc -l)

# 2. The store.
if [ -n "${S3_ENV_FILE:-}" ]; then
  ENVF=$S3_ENV_FILE
else
  "$HERE/../tests/servers/swift-s3.sh" start "$W/swift" "${SWIFT_PORT:-48580}" >&2
  started_swift=1
  ENVF=$W/swift/env
fi
set -a; . "$ENVF"; set +a
export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY AWS_REGION=$S3_REGION
port=${S3_ENDPOINT##*:}; port=${port%%/*}
key=save-memory-$(date +%s%N)

# 3. The save, watched: connections to the store port owned by this PID, and VmHWM at the end
#    (the process is a child of `time`, so the poller finds it by its parent).
timefile=$W/time.txt; outfile=$W/save.out
start=$(date +%s.%N)
/usr/bin/time -v -o "$timefile" "$LC" save --store "s3://lazycache/bench" --endpoint "$S3_ENDPOINT" \
  --part-size "$PART_SIZE" --concurrency "$CONCURRENCY" --threads "$THREADS" --key "$key" "$T" > "$outfile" 2>&1 &
time_pid=$!
(
  max_conn=0; hwm=0; pid=
  while kill -0 "$time_pid" 2>/dev/null; do
    [ -z "$pid" ] && pid=$(pgrep -P "$time_pid" 2>/dev/null | head -1 || true)
    if [ -n "$pid" ]; then
      c=$(ss -tnpH state established "( dport = :$port )" 2>/dev/null | grep -c "pid=$pid," || true)
      [ "$c" -gt "$max_conn" ] && max_conn=$c
      h=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
      [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
    fi
    sleep 0.02
  done
  echo "$max_conn $hwm" > "$W/poll.txt"
) &
poll_pid=$!
rc=0; wait "$time_pid" || rc=$?
wait "$poll_pid" || true; poll_pid=
end=$(date +%s.%N)
if [ $rc != 0 ]; then echo "save failed (exit $rc):" >&2; cat "$outfile" >&2; exit 1; fi
read -r max_conn hwm_kib < "$W/poll.txt"
rss_kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$timefile")
[ "${hwm_kib:-0}" -gt "${rss_kib:-0}" ] && rss_kib=$hwm_kib
secs=$(echo "$end - $start" | bc -l | xargs printf '%.1f')
in_flight=$(grep -o 'up to [0-9]* at once' "$outfile" | grep -o '[0-9]*' | head -1 || true)
requests=$(grep -o '[0-9]* requests' "$outfile" | grep -o '[0-9]*' | head -1 || true)
to_bytes() { numfmt --from=iec "$1"; }
part_bytes=$(to_bytes "$PART_SIZE")
bound_mib=$(( ((CONCURRENCY + 1) * part_bytes + (8 << 20)) >> 20 ))
archive_mib=$(grep -o -- '-> [0-9.]* MiB' "$outfile" | grep -o '[0-9.]*' | head -1 || true)
rss_mib=$((rss_kib / 1024))

echo "lazycache save output:"; sed 's/^/  /' "$outfile"
echo
echo "| tree | files | part size | concurrency | time | peak RSS | (c+1) x part + pipe | archive | connections (polled) | requests in flight (max) | requests |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
echo "| $((tree_bytes >> 20)) MiB | $tree_files | $PART_SIZE | $CONCURRENCY | ${secs} s | ${rss_mib} MiB | ${bound_mib} MiB | ${archive_mib:-?} MiB | $max_conn | ${in_flight:-?} | ${requests:-?} |"
printf 'TSV\tsave_1g_swift\ttree_bytes=%s\tfiles=%s\tpart=%s\tconcurrency=%s\tseconds=%s\tpeak_rss_mib=%s\tbound_mib=%s\tarchive_mib=%s\tmax_conn=%s\tmax_in_flight=%s\trequests=%s\n' \
  "$tree_bytes" "$tree_files" "$PART_SIZE" "$CONCURRENCY" "$secs" "$rss_mib" "$bound_mib" "${archive_mib:-}" "$max_conn" "${in_flight:-}" "${requests:-}"
