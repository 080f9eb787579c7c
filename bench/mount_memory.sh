#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/mount_memory.sh LAZYCACHE FIXTURE_DIR [BUDGET...]
# What the mount daemon's memory budget (`mount --memory-budget`) costs and saves, per budget
# (default: 256M 128M 64M 32M), on a fixture tree (issue 15, item 5: default settings within
# 64 MiB peak and 16 MiB idle RSS on the node and mixed fixtures). FIXTURE_DIR is saved once to a
# local-directory store in WORKDIR; then, for every budget, read-only (--read-only) and writable
# (the default for a store entry) mounts of that entry, each with a cold chunk cache, run:
#   - "job": the bench's partial job (bench/scenarios.sh JOB_CMD: tsc --version, eslint
#     --version, node requires five packages, then every 7th file), only on a node_modules tree
#     with node installed;
#   - "read all": a cold full read, `find -type f -print0 | xargs -0 cat > /dev/null`.
# Per run it reports the daemon's peak RSS (VmHWM, right after the job) and its RSS 5 s later
# (VmRSS, after the idle trim of FilesystemConfig::idle_trim_ms), the wall time of the job, and
# the daemon's own figures at unmount: bytes fetched from the store (all, and on demand), frames
# decoded (a frame decoded again after an eviction counts again) of the archive's frames, and the
# budget's peak.
# Times are indicative only on a shared machine: run it under `flock /work/bench.lock` (or
# whatever lock the machine's benchmarks hold) so that no benchmark runs alongside.
# Env: WORKDIR (default /tmp/lc-mount-memory), MODES ("ro rw"), JOBS ("job read-all"), IDLE_WAIT
# (seconds before the idle RSS, 5), EXTRA (more mount options, e.g. "--fill none").
# Output: a markdown table on stdout; the mounts' logs in WORKDIR/log.
set -euo pipefail
LC=${1:?usage: mount_memory.sh LAZYCACHE FIXTURE_DIR [BUDGET...]}
FX=${2:?usage: mount_memory.sh LAZYCACHE FIXTURE_DIR [BUDGET...]}
shift 2
BUDGETS=("$@")
[ ${#BUDGETS[@]} -gt 0 ] || BUDGETS=(256M 128M 64M 32M)
LC=$(cd "$(dirname "$LC")" && pwd)/$(basename "$LC")
FX=$(cd "$FX" && pwd)
W=${WORKDIR:-/tmp/lc-mount-memory}
MODES=${MODES:-ro rw}
JOBS=${JOBS:-job read-all}
IDLE_WAIT=${IDLE_WAIT:-5}
EXTRA=${EXTRA:-}
mkdir -p "$W"
W=$(cd "$W" && pwd)
export LAZYCACHE_STORE=$W/store LAZYCACHE_RUN_DIR=$W/run LAZYCACHE_CACHE_DIR=$W/chunks
LOG=$W/log
NAME=$(basename "$FX")
[ "$NAME" = node_modules ] && NAME=$(basename "$(dirname "$FX")")
JOBP=$W/job-$NAME
M=$JOBP/$(basename "$FX")
cleanup() {
  if mountpoint -q "$M" 2>/dev/null; then "$LC" unmount --lazy "$M" >/dev/null 2>&1 || umount -l "$M" || true; fi
}
trap cleanup EXIT

# 1. The entry, saved once per fixture (again when the fixture's stamp or size changed).
KEY=memory-$NAME
stamp="$(cat "$FX/.fixture-stamp" 2>/dev/null || true) $(du -sb "$FX" | cut -f1)"
if [ "$(cat "$W/$NAME.saved" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$W/store" "$W/$NAME.saved"
  "$LC" save --key "$KEY" "$FX" >>"$LOG" 2>&1
  echo "$stamp" > "$W/$NAME.saved"
fi

# 2. The bench's partial job, on a node_modules tree (the list as bench/run.sh makes it).
JOB_LIST=$W/job-files-$NAME.txt
(cd "$FX" && find . -type f -printf '%P\n' | LC_ALL=C sort | awk 'NR % 7 == 1') > "$JOB_LIST"
JOB_CMD='(cd "$JOBP" && node_modules/.bin/tsc --version && node_modules/.bin/eslint --version && node -e "for (const m of [\"lodash\", \"express\", \"react\", \"rxjs\", \"axios\"]) require(m)" && cd node_modules && xargs -a "$JOB_LIST" -d "\n" cat > /dev/null)'
READ_ALL='find "$M" -type f -print0 | xargs -0 cat > /dev/null'
has_job() { [ "$(basename "$FX")" = node_modules ] && [ -x "$FX/.bin/tsc" ] && command -v node >/dev/null; }

kib() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
figure() { jq -r ".stats.$2 // empty" <<<"$1" | head -1; }

echo "| fixture | mount | budget | run | peak RSS MiB | RSS ${IDLE_WAIT} s later MiB | time s | fetched MiB (on demand) | frames decoded / frames | budget peak MiB |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for budget in "${BUDGETS[@]}"; do
  for mode in $MODES; do
    opts=(--memory-budget "$budget")
    [ "$mode" = ro ] && opts+=(--read-only)
    # shellcheck disable=SC2206
    [ -n "$EXTRA" ] && opts+=($EXTRA)
    for job in $JOBS; do
      case $job in
        job) has_job || continue; cmd=$JOB_CMD ;;
        read-all) cmd=$READ_ALL ;;
        *) echo "mount_memory.sh: unknown job $job" >&2; exit 2 ;;
      esac
      cleanup
      rm -rf "$LAZYCACHE_CACHE_DIR" "$M"
      mkdir -p "$M"
      # --any-paths: the entry was saved from FX, and is mounted at M.
      out=$("$LC" mount --key "$KEY" --any-paths "${opts[@]}" "$M" 2>&1) || { echo "$out" >&2; exit 1; }
      echo "$out" >>"$LOG"
      mountpoint -q "$M" || { echo "mount_memory.sh: nothing mounted at $M: $out" >&2; exit 1; }
      pid=$("$LC" status --json "$M" | jq -r '.pid // empty' | head -1)
      [ -n "$pid" ] || { echo "mount_memory.sh: no daemon pid for $M" >&2; exit 1; }
      t0=$EPOCHREALTIME
      eval "$cmd" >>"$LOG" 2>&1
      t1=$EPOCHREALTIME
      peak=$(kib "$pid" VmHWM)
      sleep "$IDLE_WAIT"
      idle=$(kib "$pid" VmRSS)
      json=$("$LC" unmount --json "$M")
      echo "$json" >>"$LOG"
      printf '| %s | %s | %s | %s | %s | %s | %s | %s (%s) | %s / %s | %s |\n' "$NAME" "$mode" "$budget" "$job" \
        "$(mib "$peak")" "$(mib "$idle")" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" \
        "$(mib $(( $(figure "$json" store_bytes) / 1024 )))" "$(mib $(( $(figure "$json" on_demand_bytes) / 1024 )))" \
        "$(figure "$json" frames_decoded)" "$(figure "$json" archive_frames)" \
        "$(mib $(( $(figure "$json" memory_peak_bytes) / 1024 )))"
    done
  done
done
