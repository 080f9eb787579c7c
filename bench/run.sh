#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/run.sh [--quick] [--runs N] [--profiles "hosted far"] [--fixtures "node mixed large random"]
#              [--out DIR] [--build DIR] [--keep-work] [--skip-local] [--no-build]
#              [--merge-tsv FILE]
#        bench/run.sh --smoke --out DIR   (under a minute: tiny trees, loopback; `make test` runs it)
#
# The benchmark suite: lazycache against the tools CI users run today, on the same fixture, the
# same store and the same emulated link, in one run. See bench/README.md for what each scenario
# measures and why.
#   1. builds lazycache and the link emulator (lc-link-proxy) in --build (default build/)
#   2. builds the fixtures (bench/make-fixture-*.sh) under $LC_BENCH_FIXTURES (default
#      bench/work/fixtures; kept between runs and shareable between checkouts)
#   3. starts Swift s3api on loopback (tests/servers/swift-s3.sh) and, per link profile, an
#      lc-link-proxy in front of it; every client talks to the store through the proxy
#   4. runs every scenario --runs times (medians quoted) and writes results.tsv, results.json,
#      RESULTS.md and results.png to --out (default: bench/ for a full run, bench/out/quick for
#      --quick)
# --quick: node fixture only, the "hosted" profile, 1 run, squashfuse_ll only: a few minutes.
# Needs root (drop_caches, FUSE mounts, apt-get for missing tools). Everything it starts (store,
# proxies, mounts) is stopped by PID or unmounted by path on exit, also on failure or Ctrl-C.
set -euo pipefail
# A failing command ends the script under set -e; say which, so that a CI log is never empty.
trap 'echo "run.sh: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)" >&2' ERR
# Nothing here reads standard input. CI starts tests with it closed, and bash's pipelines inside
# $(...) then get a pipe on descriptor 0 and lose it (make-fixture-mixed.sh died of SIGPIPE in
# 0.4 s, silently): give every command a real, empty stdin.
exec </dev/null
# Runs from a private copy of its scripts: bash reads a script as it goes, so editing bench/ during
# a long run would otherwise change the run under way.
if [ -z "${LC_BENCH_SCRIPTS:-}" ]; then
  here=$(cd "$(dirname "$0")" && pwd)
  snap=$(mktemp -d /tmp/lc-bench-scripts.XXXXXX)
  cp "$here/run.sh" "$here/scenarios.sh" "$here/report.py" "$here/fixture-large/job.sh" "$snap/"
  LC_BENCH_SCRIPTS=$snap LC_BENCH_HOME=$here exec bash "$snap/run.sh" "$@"
fi
SCRIPTS=$LC_BENCH_SCRIPTS
trap 'rm -rf "$SCRIPTS"' EXIT
HERE=$LC_BENCH_HOME
ROOT=$(dirname "$HERE")

QUICK=0 SMOKE=0 RUNS= PROFILES= FIXTURES= OUT= BUILD=${LC_BUILD:-$ROOT/build} KEEP=0 SKIP_LOCAL=0 NO_BUILD=0 MERGE_TSV=
MIXED_SCALE=1 FX_ROOT=${LC_BENCH_FIXTURES:-$HERE/work/fixtures}
# The large fixture's package list and job mode; the random fixture's size (the seeds' 512 MiB).
LARGE_LIST=$HERE/fixture-large/packages.txt LARGE_MODE=full LARGE_DIR=large RANDOM_MIB=512
# Rows of the large and random fixtures run at most this often (each run moves GBs over the link).
BIG_RUNS_MAX=${LC_BENCH_BIG_RUNS:-1}
# The link profiles the large fixture runs on (default: every profile of the run).
LARGE_PROFILES=${LC_BENCH_LARGE_PROFILES:-}
usage() { sed -n '3,4p' "$SCRIPTS/run.sh" | sed 's/^# //' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=1 ;;
    --smoke) SMOKE=1 ;;
    --runs) RUNS=${2:?}; shift ;;
    --profiles) PROFILES=${2:?}; shift ;;
    --fixtures) FIXTURES=${2:?}; shift ;;
    --out) OUT=${2:?}; shift ;;
    --build) BUILD=${2:?}; shift ;;
    --keep-work) KEEP=1 ;;
    --skip-local) SKIP_LOCAL=1 ;;
    --no-build) NO_BUILD=1 ;;
    --merge-tsv) MERGE_TSV=$(realpath "${2:?}"); shift ;;
    -h|--help) usage ;;
    *) echo "run.sh: unknown option $1" >&2; usage ;;
  esac
  shift
done
SQUASHFUSES="squashfuse squashfuse_ll"
if [ $SMOKE = 1 ]; then
  # The bench entry point exercised end to end in under a minute, so that it cannot rot: every
  # scenario that does not need the node fixture, on a ~3 MiB mixed tree, a large-fixture tree of
  # three small pure-Python packages (the same code path as the 2.3 GB one) and a 12 MiB random
  # payload, over loopback, once.
  [ -n "$OUT" ] || { echo "run.sh: --smoke needs --out DIR" >&2; exit 2; }
  QUICK=1 SQUASHFUSES=squashfuse_ll RUNS=1 PROFILES=loopback FIXTURES="mixed large random" MIXED_SCALE=0.01
  FX_ROOT=$OUT/fixtures LARGE_LIST=$HERE/fixture-large/packages-smoke.txt LARGE_MODE=smoke LARGE_DIR=large-smoke
  RANDOM_MIB=12
elif [ $QUICK = 1 ]; then
  SQUASHFUSES=squashfuse_ll
  RUNS=${RUNS:-1} PROFILES=${PROFILES:-hosted} FIXTURES=${FIXTURES:-node} OUT=${OUT:-$HERE/out/quick}
else
  RUNS=${RUNS:-2} PROFILES=${PROFILES:-hosted far} FIXTURES=${FIXTURES:-node mixed large random} OUT=${OUT:-$HERE}
fi
LARGE_PROFILES=${LARGE_PROFILES:-$PROFILES}
[ "$(id -u)" = 0 ] || { echo "run.sh: run as root (drop_caches, FUSE mounts, apt-get)" >&2; exit 1; }
INVOCATION="bench/run.sh $*"
[ $QUICK = 1 ] && INVOCATION="bench/run.sh --quick"
[ $SMOKE = 1 ] && INVOCATION="bench/run.sh --smoke --out DIR"
[ $QUICK = 0 ] && INVOCATION="bench/run.sh --runs $RUNS --profiles \"$PROFILES\" --fixtures \"$FIXTURES\""
# The variables that change what is measured are part of the command.
[ -n "${LC_BENCH_LARGE_PROFILES:-}" ] && INVOCATION="LC_BENCH_LARGE_PROFILES=$LC_BENCH_LARGE_PROFILES $INVOCATION"
[ -n "${LC_BENCH_BIG_RUNS:-}" ] && INVOCATION="LC_BENCH_BIG_RUNS=$LC_BENCH_BIG_RUNS $INVOCATION"

# ---- tools ----
need=()
tools="zstd:zstd curl:curl rclone:rclone squashfuse:squashfuse squashfuse_ll:squashfuse
       mksquashfs:squashfs-tools gnuplot:gnuplot-nox jq:jq bc:bc node:nodejs
       fusermount3:fuse3 openssl:openssl python3:python3 cmake:cmake"
case " $FIXTURES " in *" node "*) tools="$tools npm:npm" ;; esac   # npm only builds the node fixture
case " $FIXTURES " in *" large "*) tools="$tools fincore:util-linux" ;; esac
for t in $tools; do
  command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "run.sh: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }
fi
"$ROOT/.ci/install-deps.sh"
# What the large fixture's job takes from the runner rather than from the tree: LLVM's shared
# libraries, and /etc/java-17-openjdk, which the tree's JDK reaches through absolute symlinks.
if [ "$LARGE_MODE" = full ] && [[ " $FIXTURES " = *" large "* ]]; then
  runner_pkgs=(openjdk-17-jre-headless libz3-4 libedit2 libxml2 libffi8 python3)
  dpkg -s "${runner_pkgs[@]}" >/dev/null 2>&1 || {
    echo "run.sh: installing ${runner_pkgs[*]} (the large fixture's job needs them on the runner)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${runner_pkgs[@]}" >/dev/null; }
fi

# ---- build ----
if [ $NO_BUILD = 1 ]; then
  [ -x "$BUILD/bench/lc-link-proxy" ] || { echo "run.sh: --no-build but no $BUILD/bench/lc-link-proxy" >&2; exit 1; }
elif [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLC_WERROR=ON -DLC_BUILD_TESTS=OFF >/dev/null
fi
[ $NO_BUILD = 1 ] || cmake --build "$BUILD" -j "$(nproc)" --target lc-link-proxy >/dev/null
PROXY=$BUILD/bench/lc-link-proxy
LC=$BUILD/tools/lazycache
LC_BROKEN=
# A lazycache that does not build still leaves the peers to measure; its rows then say why.
if [ $NO_BUILD = 1 ]; then
  [ -x "$LC" ] || LC_BROKEN="no lazycache binary in $BUILD (--no-build)"
elif ! cmake --build "$BUILD" -j "$(nproc)" --target lazycache > "$BUILD/bench-lazycache-build.log" 2>&1; then
  LC_BROKEN="lazycache did not build at $(git -C "$ROOT" rev-parse --short HEAD) ($BUILD/bench-lazycache-build.log)"
  echo "run.sh: $LC_BROKEN" >&2
fi

# ---- work area and cleanup ----
mkdir -p "$OUT" "$HERE/work"
W=$(mktemp -d "$HERE/work/run.XXXXXX")   # same disk as the fixtures; gitignored
LOG=$W/commands.log
TSV=$W/results.tsv
MOUNTS=()      # paths to unmount on exit
TARGET_MOUNTS=()   # the job's file systems (fresh_target), unmounted after MOUNTS
PIDS=()        # processes to stop on exit
SWIFT_DIR=$W/swift
cleanup() {
  set +e
  trap - ERR
  local m p
  for m in "${MOUNTS[@]}"; do mountpoint -q "$m" && { fusermount3 -u "$m" 2>/dev/null || umount -l "$m"; }; done
  for m in "${TARGET_MOUNTS[@]}"; do mountpoint -q "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }; done
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  [ -d "$SWIFT_DIR/run" ] && "$ROOT/tests/servers/swift-s3.sh" stop "$SWIFT_DIR" >/dev/null
  if [ $KEEP = 0 ]; then rm -rf "$W"; else echo "run.sh: work dir kept: $W"; fi
  rm -rf "$SCRIPTS"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '%s  %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
load1() { cut -d' ' -f1 /proc/loadavg; }
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# The smoke run checks the flow, not the figures, beside the rest of `make test`: dropping every
# cache of the machine would evict other tests' dentries and handed-off pages (mount_test's walk
# case then saw every lookup sent again: 338 instead of < 9, session 38).
[ $SMOKE = 1 ] && drop_caches() { sync; }

# ---- the job's file system ----
# Every restore, extract, mount and job lands in $JOBP, and fresh_target makes $JOBP a new, empty,
# journaled ext4 (a sparse image under $W, loop-mounted) before each run. Why: a tree removed
# right before the next run is not a neutral start. This machine's root ext4 has no journal, and
# without one ext4's inode allocator skips inodes deleted in the last minutes (recently_deleted()
# in find_inode_bit), so a restore into a just-emptied directory cost every tool 3-10x more system
# time, in whichever run came next (bench/RESULTS.md, addendum of 2026-12-03). A CI runner starts
# from a fresh VM disk with a journal; so does every run here. Where no loop device can be set
# up, $JOBP stays a plain directory (removed and made again) and the machine table says so.
TARGET_IMG=$W/target.img
TARGET_FS="ext4 (journaled), made fresh by mkfs.ext4 on a loop image before every run"
target_probe() {  # sets TARGET_FS to the fallback if a loop ext4 cannot be made here
  local d=$W/target-probe why
  mkdir -p "$d"
  if ! why=$( { truncate -s 64M "$TARGET_IMG" && mkfs.ext4 -q -F "$TARGET_IMG" &&
                mount -o loop "$TARGET_IMG" "$d" && umount "$d"; } 2>&1); then
    TARGET_FS="plain directory on the root file system (no loop ext4 here: $(head -1 <<<"$why"))"
    say "target file system: $TARGET_FS"
  fi
  rm -f "$TARGET_IMG"; rmdir "$d"
}
target_is_loop() { [[ $TARGET_FS == ext4* ]]; }
# fresh_target: $JOBP empty on a new file system (sized 3x the fixture's tree + 1 GiB, sparse;
# lazy_itable_init and noinit_itable: a new image reads as zeros, so no background zeroing runs
# during the timed command); the caller's mount at $JOBD is unmounted first.
fresh_target() {
  lc_unmount "$JOBD"
  if mountpoint -q "$JOBP"; then umount "$JOBP"; fi
  rm -rf "$JOBP"; rm -f "$TARGET_IMG"
  mkdir -p "$JOBP"
  if target_is_loop; then
    truncate -s $(( $(fx_bytes "$fx") * 3 + (1 << 30) )) "$TARGET_IMG"
    mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 "$TARGET_IMG"
    mount -o loop,noinit_itable "$TARGET_IMG" "$JOBP"
    TARGET_MOUNTS+=("$JOBP")
  fi
  sync
}
# release_target: the job's file system removed at the end of a fixture's scenarios.
release_target() {
  lc_unmount "$JOBD"
  if mountpoint -q "$JOBP"; then umount "$JOBP"; fi
  rm -rf "$JOBP"; rm -f "$TARGET_IMG"
}

# ---- measurement ----
# Each measurement is one TSV row:
#   scenario fixture profile tool median_s min_s max_s runs load1 command note
# `note` carries key=value extras (sizes, RSS, bytes fetched) as a JSON object.
printf 'scenario\tfixture\tprofile\ttool\tmedian_s\tmin_s\tmax_s\truns\tload1\tcommand\tnote\n' > "$TSV"
row() {  # row SCEN FX PROF TOOL MEDIAN MIN MAX RUNS CMD NOTE (a command becomes one line)
  local cmd
  cmd=$(tr '\t\n' '  ' <<<"$9" | tr -s ' ' | sed 's/ $//')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$(load1)" "$cmd" "${10:-{\}}" >> "$TSV"
}
not_measured() {  # not_measured SCEN FX PROF TOOL WHY
  row "$1" "$2" "$3" "$4" "" "" "" 0 "" "{\"not_measured\": $(jq -Rn --arg w "$5" '$w')}"
  say "  $4: not measured: $5"
}
# measure SCEN FX PROF TOOL PREPARE COMMAND [AFTER]: PREPARE and AFTER run untimed around each
# run; COMMAND is timed (wall clock). NOTE (a JSON object) may be set by AFTER via $NOTE.
NOTE='{}'
measure() {
  local scen=$1 fx=$2 prof=$3 tool=$4 prep=$5 cmd=$6 after=${7:-} i t0 t1 times=() runs=$RUNS
  # The job alone moves nothing over the link and is the reference of every overhead: all runs.
  case $fx:$tool in "large:job alone"*) ;; large:*|random:*) [ "$runs" -le "$BIG_RUNS_MAX" ] || runs=$BIG_RUNS_MAX ;; esac
  NOTE='{}'
  for ((i = 1; i <= runs; i++)); do
    eval "$prep" >>"$LOG" 2>&1 || { not_measured "$scen" "$fx" "$prof" "$tool" "prepare failed: $prep (see log)"; return 0; }
    echo "### $scen $fx $prof $tool run $i: $cmd" >>"$LOG"
    t0=$EPOCHREALTIME
    if ! eval "$cmd" >>"$LOG" 2>&1; then
      tail -5 "$LOG" >&2
      not_measured "$scen" "$fx" "$prof" "$tool" "command failed: $(tail -1 "$LOG" | cut -c1-160)"
      return 0
    fi
    t1=$EPOCHREALTIME
    times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')")
    if [ -n "$after" ]; then eval "$after" >>"$LOG" 2>&1 || true; fi
  done
  local sorted n med
  sorted=$(printf '%s\n' "${times[@]}" | sort -g)
  n=${#times[@]}
  med=$(printf '%s\n' "$sorted" | awk -v n="$n" '{ a[NR] = $1 } END { if (n % 2) print a[(n + 1) / 2]; else print (a[n / 2] + a[n / 2 + 1]) / 2 }')
  row "$scen" "$fx" "$prof" "$tool" "$med" "$(printf '%s\n' "$sorted" | head -1)" "$(printf '%s\n' "$sorted" | tail -1)" "$n" "$cmd" "$NOTE"
  say "  $tool: median $med s (runs: ${times[*]})"
}
note_add() {  # note_add KEY NUMBER: add a number to $NOTE
  NOTE=$(jq -c --arg k "$1" --argjson v "$2" '. + {($k): $v}' <<<"$NOTE")
}
lc_has() { [ -z "$LC_BROKEN" ] && "$LC" "$1" --help >/dev/null 2>&1; }
lc_why() {  # why a lazycache row for command $1 is missing
  if [ -n "$LC_BROKEN" ]; then echo "$LC_BROKEN"; else echo "no '$1' command in this build"; fi
}
lc_has_opt() { "$LC" "$1" --help 2>&1 | grep -q -- "$2"; }

# ---- fixtures ----
declare -A TREE   # fixture -> directory whose contents are cached (node_modules, mixed/)
for fx in $FIXTURES; do
  case $fx in
    node) "$HERE/make-fixture-node.sh" "$FX_ROOT/node" >&2; TREE[node]=$FX_ROOT/node/node_modules ;;
    mixed) "$HERE/make-fixture-mixed.sh" "$FX_ROOT/mixed" "$MIXED_SCALE" >&2; TREE[mixed]=$FX_ROOT/mixed ;;
    large) "$HERE/make-fixture-large.sh" "$FX_ROOT/$LARGE_DIR" "$LARGE_LIST" >&2; TREE[large]=$FX_ROOT/$LARGE_DIR/tree ;;
    random) "$HERE/make-fixture-random.sh" "$FX_ROOT/random-$RANDOM_MIB" "$RANDOM_MIB" >&2; TREE[random]=$FX_ROOT/random-$RANDOM_MIB/payload ;;
    *) echo "run.sh: unknown fixture $fx (node, mixed, large, random)" >&2; exit 2 ;;
  esac
done
fx_bytes() { du -sb --exclude=.fixture-stamp "${TREE[$1]}" | cut -f1; }
fx_files() { find "${TREE[$1]}" -type f ! -name .fixture-stamp | wc -l; }

# The job's fixed file list (node): every 7th regular file in C-locale path order (about 14 %
# of the files), relative to node_modules. Derived from the pinned tree, so it is the same list
# on every machine.
JOB_LIST=$W/job-files.txt
# The package-clustered list: every file of every 7th package (scoped packages count one by one),
# as a job that loads whole packages reads them. Also about 14 % of the files.
JOB_PKG_LIST=$W/job-pkg-files.txt
if [ -n "${TREE[node]:-}" ]; then
  (cd "${TREE[node]}" && find . -type f -printf '%P\n' | LC_ALL=C sort | awk 'NR % 7 == 1') > "$JOB_LIST"
  (cd "${TREE[node]}" && for d in */; do
     d=${d%/}
     case $d in @*) for s in "$d"/*/; do echo "${s%/}"; done ;; *) echo "$d" ;; esac
   done | LC_ALL=C sort | awk 'NR % 7 == 1' | while read -r p; do find "$p" -type f; done | LC_ALL=C sort) > "$JOB_PKG_LIST"
fi
# The large fixture's job reads, besides what its programs load (about 18 % of the tree's bytes
# with the kernel's readahead: libLLVM, the JDK's modules, cc1, Python's extension modules), every
# 200th regular file in C-locale path order (about 0.4 %); job_share measures the total each run.
JOB_LARGE_LIST=$W/job-large-files.txt
if [ -n "${TREE[large]:-}" ]; then
  (cd "${TREE[large]}" && find . -type f -printf '%P\n' | LC_ALL=C sort | awk 'NR % 200 == 1') > "$JOB_LARGE_LIST"
fi

# ---- store ----
free_port_base() {  # five consecutive free ports from 18600 on
  local p q
  for ((p = 18600; p < 19600; p += 10)); do
    for ((q = p; q < p + 5; q++)); do (exec 3<>"/dev/tcp/127.0.0.1/$q") 2>/dev/null && continue 2; done
    echo "$p"; return 0
  done
  return 1
}
SWIFT_PORT=$(free_port_base)
say "starting Swift s3api on 127.0.0.1:$SWIFT_PORT"
SWIFT_BUCKETS=bench "$ROOT/tests/servers/swift-s3.sh" start "$SWIFT_DIR" "$SWIFT_PORT" >&2
# shellcheck disable=SC1091
. "$SWIFT_DIR/env"
BUCKET=bench
export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY AWS_REGION=$S3_REGION
unset AWS_CA_BUNDLE AWS_PROFILE AWS_SESSION_TOKEN   # rclone 1.60 fails with AWS_CA_BUNDLE set
NETRC=$W/netrc
( umask 077; printf 'machine 127.0.0.1 login %s password %s\n' "$S3_ACCESS_KEY" "$S3_SECRET_KEY" > "$NETRC" )
CURL="curl -sS --fail --netrc-file $NETRC --aws-sigv4 aws:amz:$S3_REGION:s3 -H x-amz-content-sha256:UNSIGNED-PAYLOAD"
RCLONE_FLAGS="--multi-thread-streams 8 --multi-thread-cutoff 1M"
export RCLONE_CONFIG_S3_TYPE=s3 RCLONE_CONFIG_S3_PROVIDER=Other RCLONE_CONFIG_S3_FORCE_PATH_STYLE=true \
       RCLONE_CONFIG_S3_REGION=$S3_REGION RCLONE_CONFIG_S3_ACCESS_KEY_ID=$S3_ACCESS_KEY \
       RCLONE_CONFIG_S3_SECRET_ACCESS_KEY=$S3_SECRET_KEY

start_proxy() {  # start_proxy PROFILE: sets E (endpoint through the proxy) and PROXY_STATS
  PROXY_STATS=$W/proxy-$1.json
  rm -f "$W/proxy-$1.port"
  "$PROXY" --upstream "127.0.0.1:$SWIFT_PORT" --profile "$1" --port-file "$W/proxy-$1.port" \
    --stats "$PROXY_STATS" 2>>"$LOG" &
  PROXY_PID=$!
  PIDS+=("$PROXY_PID")
  for _ in $(seq 100); do [ -s "$W/proxy-$1.port" ] && break; sleep 0.05; done
  E=http://127.0.0.1:$(cat "$W/proxy-$1.port")
  export RCLONE_CONFIG_S3_ENDPOINT=$E
}
stop_proxy() { kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null || true; }
# Bytes the store sent to clients through the proxy so far (its stats file lags <= 100 ms).
fetched_bytes() { sleep 0.25; jq .bytes_to_client "$PROXY_STATS" 2>/dev/null || echo 0; }

target_probe

# ---- machine facts ----
MACHINE=$(jq -n --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
  --arg nproc "$(nproc)" --arg mem "$(free -g | awk '/Mem:/ {print $2}') GiB" \
  --arg kernel "$(uname -r)" --arg os "$(. /etc/os-release && echo "$PRETTY_NAME")" \
  --arg disk "$(df -T "$W" | awk 'NR == 2 {print $2 " on " $1}')" --arg target_fs "$TARGET_FS" \
  --arg tools "zstd $(zstd -V | grep -o 'v[0-9.]*'), $(tar --version | head -1), curl $(curl -V | head -1 | cut -d' ' -f2), rclone $(rclone version 2>/dev/null | head -1 | cut -d' ' -f2), squashfuse $(dpkg-query -W -f='${Version}' squashfuse), node $(node -v), lazycache $("$LC" --version 2>/dev/null | cut -d' ' -f2 || echo none)" \
  --arg commit "$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- . 2>/dev/null || echo '+local changes')" \
  --arg started "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
  '{cpu: $cpu, nproc: $nproc, memory: $mem, kernel: $kernel, os: $os, disk: $disk, target_fs: $target_fs, tools: $tools,
    commit: $commit, started: $started, load_at_start: $load}')

. "$SCRIPTS/scenarios.sh"

# ---- run ----
say "work dir $W; runs $RUNS; profiles: $PROFILES; fixtures: $FIXTURES"
# Local scenarios (pack, warm reads) on the trees of node and mixed: on the large tree they would
# take longer than the rest of the run, and the random payload is not a tree.
if [ $SKIP_LOCAL = 0 ]; then for fx in $FIXTURES; do case $fx in large|random) ;; *) run_local_scenarios "$fx" ;; esac; done; fi
for prof in $PROFILES; do
  start_proxy "$prof"
  say "link profile $prof: store at $E through lc-link-proxy"
  for fx in $FIXTURES; do
    if [ "$fx" = large ] && [[ " $LARGE_PROFILES " != *" $prof "* ]]; then say "large fixture: not on $prof (LC_BENCH_LARGE_PROFILES)"; continue; fi
    if [ "$fx" = random ]; then run_transfer_scenarios "$fx" "$prof"; continue; fi
    run_link_scenarios "$fx" "$prof"
    # The traced and incremental rows of the large fixture run on the first profile only: on far
    # they cost two minutes and measure the runner's side, which the link barely changes.
    if [ "$fx" = large ] && ! first_profile; then say "large fixture: traced and incremental rows on ${PROFILES%% *} only"; continue; fi
    lc_traced_job "$fx" "$prof"
    case $fx in node|large) lc_incremental_rows "$fx" "$prof" ;; esac  # issue 17 item 4 (scenarios.sh)
  done
  stop_proxy
done
MACHINE=$(jq -c --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" --arg ended "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  '. + {load_at_end: $load, ended: $ended}' <<<"$MACHINE")

# ---- report ----
# --merge-tsv: rows of an earlier run (its header dropped) go first; RESULTS.md says so.
if [ -n "$MERGE_TSV" ]; then
  { head -1 "$TSV"; tail -n +2 "$MERGE_TSV"; tail -n +2 "$TSV"; } > "$W/merged.tsv"
  mv "$W/merged.tsv" "$TSV"
  MACHINE=$(jq -c --arg m "$(basename "$MERGE_TSV")" --arg n "${LC_BENCH_MERGE_NOTE:-}" \
    '. + {merged_rows_from: $m} + (if $n == "" then {} else {merge_note: $n} end)' <<<"$MACHINE")
fi
cp "$TSV" "$OUT/results.tsv"
python3 "$SCRIPTS/report.py" --tsv "$TSV" --machine "$MACHINE" --invocation "$INVOCATION" \
  --profiles "$(for p in $PROFILES; do "$PROXY" --profile "$p" --describe; done | jq -s -c .)" --out "$OUT"
say "wrote $OUT/RESULTS.md, $OUT/results.json, $OUT/results.png"
