# SPDX-License-Identifier: MIT
# bench/scenarios.sh -- the scenarios of bench/run.sh (sourced by it; uses its helpers and
# variables: measure, not_measured, value_row, note_add, LC, CURL, E, BUCKET, TREE, W, RUNS ...).
# Commands are kept as literal strings so RESULTS.md can quote exactly what was timed.

# A run counter for names that must be new on every run (store entries are immutable).
SEQ=0
next_seq() { SEQ=$((SEQ + 1)); }

# value_row SCEN FX PROF TOOL VALUE UNIT COMMAND: a measured quantity that is not a time.
value_row() {
  row "$1" "$2" "$3" "$4" "$5" "$5" "$5" 1 "$7" "{\"unit\": \"$6\"}"
  say "  $4: $5 $6"
}

rss_kib() {  # rss_kib PID FIELD(VmHWM|VmRSS)
  awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0
}
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
# to_mib "12.3 KiB": a size as lazycache prints it (common/byte_format.h: B, KiB, MiB, GiB, TiB)
# in MiB; nothing for text that is no such size.
to_mib() {
  awk '{ u = $2; f = u == "B" ? 1 / 1048576 : u == "KiB" ? 1 / 1024 : u == "MiB" ? 1 : u == "GiB" ? 1024 : u == "TiB" ? 1048576 : ""
         if ($1 ~ /^[0-9.]+$/ && f != "") printf "%.6f\n", $1 * f }' <<<"$1"
}

# --- lazycache command lines, kept in one place as the CLI lands ---
LC_STORE_OPTS=()
lc_store() { LC_STORE_OPTS=(--store "s3://$BUCKET/lc" --endpoint "$E" --region "$S3_REGION" --path-style); }
# lc_unmount DIR: unmounts DIR if mounted (lazycache first, fusermount3 as a fallback); the
# figures lazycache prints for the mount are kept in $W/last-unmount.json.
lc_unmount() {
  mountpoint -q "$1" || return 0
  "$LC" unmount --json "$1" > "$W/last-unmount.json" 2>>"$LOG" || fusermount3 -u "$1" 2>/dev/null || umount -l "$1"
}
# Adds lazycache's own figures of the last unmounted mount to $NOTE.
note_lc_figures() {
  local k v
  for k in store_bytes store_range_reads bytes_served files_opened frames_from_store prefetched_frames; do
    v=$(jq -r ".stats.$k // empty" "$W/last-unmount.json" 2>/dev/null | head -1)
    [ -n "$v" ] && note_add "lc_$k" "$v"
  done
  rm -f "$W/last-unmount.json"
}
# The bench's own chunk cache (never the user's), emptied before every cold run.
export LAZYCACHE_CACHE_DIR=$W/lc-chunks
lc_clear_cache() { "$LC" cache clear >/dev/null 2>&1 || rm -rf "$LAZYCACHE_CACHE_DIR"; }
lc_daemon_pid() {  # the daemon of the last mount: `lazycache mount` prints "daemon pid N"
  grep -o 'daemon pid [0-9]*' "$LOG" | tail -1 | cut -d' ' -f3
}
# lc_wait_idle DIR: returns once the mount at DIR has nothing in flight that its unmount would
# wait for: no frame queued or being fetched (`status --json`: frames_pending; the mount queues
# its fill before `mount` returns) and the tree walk ended (warm_active: an unmount during the
# walk must first stop it, 100-200 ms on node in session 37, whichever ends first). At most 60 s;
# an idle mount is what the unmount row times.
lc_wait_idle() {
  local i busy
  for i in $(seq 600); do
    busy=$("$LC" status --json "$1" 2>/dev/null | jq -r '(.stats.frames_pending // 0) + (.stats.warm_active // 0)' | head -1) || return 0
    [ "${busy:-0}" = 0 ] && return 0
    sleep 0.1
  done
}

# The job a CI step runs on the node tree (cwd = the tree's parent): two CLIs print their
# version, node loads five packages, and the fixed list of files is read.
JOB_CMD='(cd "$JOBP" && node_modules/.bin/tsc --version && node_modules/.bin/eslint --version && node -e "for (const m of [\"lodash\", \"express\", \"react\", \"rxjs\", \"axios\"]) require(m)" && cd node_modules && xargs -a "$JOB_LIST" -d "\n" cat > /dev/null)'
# The same step reading whole packages instead of scattered files (see JOB_PKG_LIST in run.sh).
JOB_PKG_CMD=${JOB_CMD//JOB_LIST/JOB_PKG_LIST}
READ_ALL='find "$JOBD" -type f -print0 | xargs -0 cat > /dev/null'
# The large fixture's step (bench/fixture-large/job.sh, run from the run's private copy): real
# programs of the tree, then the fixed list of files. Its output goes to the log.
JOB_LARGE_CMD='"$SCRIPTS/job.sh" "$JOBD" "$W/job-out" "$JOB_LARGE_LIST" "$LARGE_MODE"'

# The state every way of a job starts from (issue 14, point 3): the tree removed and lazycache's
# chunk cache cleared, so the cache is cold for all; the page cache is NOT dropped, and the
# programs outside the tree are run once, so they are as warm as for the job alone (dropping the
# page cache before a way but not before the reference would count the tools' own cold start as
# cache overhead).
warm_tools() {
  "$LC" --version; $CURL --version; zstd -V; tar --version; rclone version; /usr/bin/python3 -c pass
  node -v 2>/dev/null || true
}
PREP_COLD_TREE='fresh_target; rm -f "$W/dl.tar.zst"; lc_clear_cache; warm_tools'
PREP_COLD_MOUNT=$PREP_COLD_TREE'; mkdir -p "$JOBD"'
# The job alone: a complete local tree at the job's path (copied from the fixture if a way left it
# incomplete), then the job once untimed, so the tree and the programs are in the page cache.
PREP_ALONE='lc_unmount "$JOBD"; if [ "$(cd "$T" && find . | LC_ALL=C sort | md5sum)" != "$(cd "$JOBD" 2>/dev/null && find . | LC_ALL=C sort | md5sum)" ]; then fresh_target; cp -a "$T" "$JOBP/"; fi; '

# job_share JOBCMD: the bytes of the tree's files the job brings into the page cache (what it
# reads, with the kernel's readahead), on the local tree at $JOBD: its pages are evicted first
# (POSIX_FADV_DONTNEED on each file; nothing else's page cache is touched), then the job runs
# and fincore counts what is resident. Prints the byte count.
job_share() {
  sync
  /usr/bin/python3 -c '
import os, sys
for root, dirs, files in os.walk(sys.argv[1]):
    for f in files:
        p = os.path.join(root, f)
        if not os.path.islink(p):
            fd = os.open(p, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)' "$JOBD"
  eval "$1" >>"$LOG" 2>&1
  # One path per inode: a hardlinked file's pages are counted once, as du counts its bytes.
  (cd "$JOBD" && find . -type f -printf '%i %P\n' | sort -u -k1,1 | cut -d' ' -f2- | tr '\n' '\0' |
     xargs -0 -r fincore -b -n -o RES) | awk '{ s += $1 } END { print s + 0 }'
}

# ---- local scenarios: no store, no link ----
run_local_scenarios() {
  local fx=$1 T=${TREE[$1]}
  local P N
  P=$(dirname "$T") N=$(basename "$T")
  say "fixture $fx: $(fx_bytes "$fx") bytes, $(fx_files "$fx") files (local scenarios)"
  tar -cf - -C "$P" "$N" > /dev/null   # tree warm in the page cache for every packer alike

  say "pack ($fx)"
  measure pack "$fx" local "tar | zstd -T0 -3" "rm -f $W/$fx.tar.zst" \
    'tar -cf - -C "$P" "$N" | zstd -q -T0 -3 -o "$W/$fx.tar.zst"' \
    'note_add archive_bytes "$(stat -c %s "$W/$fx.tar.zst")"'
  measure pack "$fx" local "mksquashfs zstd -3" "rm -f $W/$fx.sqfs" \
    'mksquashfs "$T" "$W/$fx.sqfs" -comp zstd -Xcompression-level 3 -noappend -quiet -no-progress' \
    'note_add archive_bytes "$(stat -c %s "$W/$fx.sqfs")"'
  if lc_has pack; then
    measure pack "$fx" local "lazycache pack" "rm -f $W/$fx.lc.tar.zst" \
      '"$LC" pack -o "$W/$fx.lc.tar.zst" "$T"' \
      'note_add archive_bytes "$(stat -c %s "$W/$fx.lc.tar.zst")"'
  else
    not_measured pack "$fx" local "lazycache pack" "$(lc_why pack)"
  fi
  # The default frame size's trade-off: smaller frames cost ratio and time, fetch less per read.
  if lc_has pack; then
    local fs
    for fs in 1M 16M; do
      measure frames "$fx" local "lazycache pack --frame-size $fs" "rm -f $W/$fx.fs.tar.zst" \
        '"$LC" pack --frame-size '"$fs"' -o "$W/$fx.fs.tar.zst" "$T"' \
        'note_add archive_bytes "$(stat -c %s "$W/$fx.fs.tar.zst")"'
    done
    rm -f "$W/$fx.fs.tar.zst"
  fi

  # Warm metadata walks and reads: each filesystem is read once untimed, then timed.
  say "warm find and reads ($fx)"
  local M=$W/mnt-sq-$fx JOBD
  mkdir -p "$M"
  JOBD=$T
  measure find_warm "$fx" local "native disk" "find '$JOBD' > /dev/null" 'find "$JOBD" | wc -l > /dev/null'
  measure read_warm "$fx" local "native disk" "$READ_ALL" "$READ_ALL"
  for sq in $SQUASHFUSES; do
    MOUNTS+=("$M")
    $sq -f "$W/$fx.sqfs" "$M" &
    local sqpid=$!
    PIDS+=("$sqpid")
    for _ in $(seq 100); do mountpoint -q "$M" && break; sleep 0.05; done
    JOBD=$M
    measure find_warm "$fx" local "$sq" "find '$JOBD' > /dev/null" 'find "$JOBD" | wc -l > /dev/null'
    measure read_warm "$fx" local "$sq" "$READ_ALL" "$READ_ALL"
    value_row rss_peak "$fx" local "$sq" "$(mib $(( $(rss_kib $sqpid VmHWM) * 1024 )))" MiB "VmHWM of $sq after the reads"
    sleep 5
    value_row rss_idle "$fx" local "$sq" "$(mib $(( $(rss_kib $sqpid VmRSS) * 1024 )))" MiB "VmRSS of $sq 5 s later"
    fusermount3 -u "$M"; wait $sqpid 2>/dev/null || true
  done
  if lc_has mount && lc_has pack; then
    lc_local_warm "$fx"
  else
    for s in find_warm read_warm rss_peak rss_idle; do not_measured $s "$fx" local "lazycache mount" "$(lc_why mount)"; done
  fi
}

# lazycache's own warm numbers, from the local archive `pack` wrote, so that only the mount is
# timed (squashfuse reads a local image too).
lc_local_warm() {
  local fx=$1 M=$W/mnt-lc-$fx JOBD
  mkdir -p "$M"
  MOUNTS+=("$M")
  if [ ! -f "$W/$fx.lc.tar.zst" ] || ! "$LC" mount --archive "$W/$fx.lc.tar.zst" "$M" >>"$LOG" 2>&1; then
    for s in find_warm read_warm rss_peak rss_idle; do
      not_measured $s "$fx" local "lazycache mount" "mount --archive failed (see commands.log)"
    done
    return 0
  fi
  JOBD=$M
  measure find_warm "$fx" local "lazycache mount" "find '$JOBD' > /dev/null" 'find "$JOBD" | wc -l > /dev/null'
  measure read_warm "$fx" local "lazycache mount" "$READ_ALL" "$READ_ALL"
  local p
  p=$(lc_daemon_pid "$M")
  if [ -n "$p" ]; then
    value_row rss_peak "$fx" local "lazycache mount" "$(mib $(( $(rss_kib "$p" VmHWM) * 1024 )))" MiB "VmHWM of the mount daemon after the reads"
    sleep 5
    value_row rss_idle "$fx" local "lazycache mount" "$(mib $(( $(rss_kib "$p" VmRSS) * 1024 )))" MiB "VmRSS of the mount daemon 5 s later"
  else
    for s in rss_peak rss_idle; do not_measured $s "$fx" local "lazycache mount" "mount daemon's PID not found"; done
  fi
  # Unmount of an idle mount (issue 15, item 4: <= 50 ms): a fresh mount of the local archive,
  # its fill done, then `unmount` timed until the daemon has exited and the figures are printed.
  measure unmount "$fx" local "lazycache unmount, idle mount (--archive)" \
    'lc_unmount "$M"; "$LC" mount --archive "$W/$fx.lc.tar.zst" "$M" && lc_wait_idle "$M"' '"$LC" unmount "$M"'
  lc_unmount "$M"
}

# ---- scenarios over the store and the emulated link ----
# restore --extract refuses symlinks whose target lies outside the target directory unless told
# (the large tree's JDK has 25 into /etc/java-17-openjdk; tar -x, the peers, extracts them as
# they are), so the bench passes the flag wherever this build has it.
LC_RESTORE_FLAGS=
if lc_has_opt restore --allow-external-symlinks 2>/dev/null; then LC_RESTORE_FLAGS=--allow-external-symlinks; fi
# restore_peer_rows SCEN: the full restore's peers, each from an empty target and a dropped page
# cache (uses the caller's fx, prof, OBJ, JOBP, JOBD and PREP_EMPTY).
# On the large fixture the download-then-extract row is left out (its job row is the same way,
# and each row there costs a minute): the goals compare with the other two. So is it on the random
# payload after the first link profile (a minute on far; the streamed row is the seeds' peer).
restore_peer_rows() {
  [ "$fx" = large ] || { [ "$fx" = random ] && ! first_profile; } || measure "$1" "$fx" "$prof" "curl GET, then zstd -d | tar -x" "$PREP_EMPTY" \
    '$CURL -o "$W/dl.tar.zst" "$E/$BUCKET/$OBJ" && zstd -dc "$W/dl.tar.zst" | tar -xf - -C "$JOBP"'
  measure "$1" "$fx" "$prof" "curl | zstd -d | tar -x" "$PREP_EMPTY" \
    '$CURL "$E/$BUCKET/$OBJ" | zstd -dc | tar -xf - -C "$JOBP"'
  measure "$1" "$fx" "$prof" "rclone 8 streams, then extract" "$PREP_EMPTY" \
    'rclone copyto "s3:$BUCKET/$OBJ" "$W/dl.tar.zst" $RCLONE_FLAGS && zstd -dc "$W/dl.tar.zst" | tar -xf - -C "$JOBP"'
}
run_link_scenarios() {
  local fx=$1 prof=$2 T=${TREE[$1]}
  # The job's directory: a copy of the fixture at a fixed path, as a CI cache path would be.
  JOBP=$W/job-$fx JOBD=$W/job-$fx/$(basename "$T")
  if [ ! -d "$JOBD" ]; then fresh_target && cp -a "$T" "$JOBP/"; fi
  local N ARCH=$W/$fx.job.tar.zst OBJ="peer/$fx.tar.zst"
  N=$(basename "$JOBD")
  [ -f "$ARCH" ] || tar -cf - -C "$JOBP" "$N" | zstd -q -T0 -3 -o "$ARCH"   # once per fixture
  local abytes tree_file_bytes
  abytes=$(stat -c %s "$ARCH")
  tree_file_bytes=$(find "$T" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
  say "fixture $fx over link $prof: archive $abytes bytes"

  # save: pack + upload. actions/cache packs to a temp file, then uploads it.
  say "save ($fx, $prof)"
  measure save "$fx" "$prof" "tar | zstd -T0 -3, curl PUT" 'next_seq; rm -f "$W/up.tar.zst"' \
    'tar -cf - -C "$JOBP" "$N" | zstd -q -T0 -3 -o "$W/up.tar.zst" && $CURL -T "$W/up.tar.zst" "$E/$BUCKET/peer/$fx-$prof-$SEQ.tar.zst"'
  $CURL -T "$ARCH" "$E/$BUCKET/$OBJ"
  lc_store
  local KEY=$fx-$prof
  if lc_has save; then
    measure save "$fx" "$prof" "lazycache save" 'next_seq' \
      '"$LC" save "${LC_STORE_OPTS[@]}" --key "$fx-$prof-$SEQ" "$JOBD"'
    # The entry the later scenarios read: the last timed save's when it was measured (saving 2.3 GB
    # once more would cost a minute), else one saved now.
    if [ "$(tail -1 "$TSV" | cut -f4-5 | grep -c '^lazycache save	[0-9]')" = 1 ]; then
      KEY=$fx-$prof-$SEQ
    else
      "$LC" save "${LC_STORE_OPTS[@]}" --key "$KEY" "$JOBD" >>"$LOG" 2>&1 || true
    fi
  else
    not_measured save "$fx" "$prof" "lazycache save" "$(lc_why save)"
  fi

  # full restore: every byte downloaded and every file created before the job can start.
  say "full restore ($fx, $prof)"
  local PREP_EMPTY='fresh_target; rm -f "$W/dl.tar.zst"; drop_caches'
  restore_peer_rows restore
  if lc_has restore && lc_has_opt restore --extract; then
    measure restore "$fx" "$prof" "lazycache restore --extract" "$PREP_EMPTY" \
      '"$LC" restore "${LC_STORE_OPTS[@]}" $LC_RESTORE_FLAGS --key "$KEY" --extract "$JOBD"'
  else
    not_measured restore "$fx" "$prof" "lazycache restore --extract" "$(lc_why restore) (or no --extract)"
  fi

  # mount ready: from the command to a mount that serves requests. Peers: the full restore
  # above (the time before a job can start without a mount) and a bare download of the archive.
  say "mount ready ($fx, $prof)"
  # The bare download of the large archive costs a minute on far and says what the full restore's
  # curl row says: measured on the first link profile only (time limit of the full run, issue 14).
  [ "$fx" = large ] && ! first_profile || measure download "$fx" "$prof" "curl GET (archive only)" 'rm -f "$W/dl.tar.zst"; drop_caches' \
    '$CURL -o "$W/dl.tar.zst" "$E/$BUCKET/$OBJ"' "note_add archive_bytes $abytes"
  local PREP_MOUNT='fresh_target; mkdir -p "$JOBD"; lc_clear_cache; drop_caches'
  if lc_has mount; then
    MOUNTS+=("$JOBD")
    measure mount_ready "$fx" "$prof" "lazycache mount" "$PREP_MOUNT"'; B0=$(fetched_bytes)' \
      '"$LC" mount "${LC_STORE_OPTS[@]}" --key "$KEY" "$JOBD"' \
      'note_add fetched_bytes $(( $(fetched_bytes) - B0 )); note_add archive_bytes '"$abytes"'; lc_unmount "$JOBD"'
    # Unmount of an idle mount over the link (the fill done first: nothing in flight); the same
    # command as the local row's (an unmount never needs the store).
    measure unmount "$fx" "$prof" "lazycache unmount, idle mount (--store)" \
      "$PREP_MOUNT"'; "$LC" mount "${LC_STORE_OPTS[@]}" --key "$KEY" "$JOBD" && lc_wait_idle "$JOBD"' '"$LC" unmount "$JOBD"'
  else
    not_measured mount_ready "$fx" "$prof" "lazycache mount" "$(lc_why mount)"
  fi

  # partial jobs: node's (about 14 % of the files) and the large fixture's (5-20 % of the bytes).
  if [ "$fx" = node ]; then
    local job_bytes
    job_bytes=$(cd "$T" && xargs -a "$JOB_LIST" -d '\n' stat -c %s | awk '{ s += $1 } END { print s }')
    lc_job_rows job "$fx" "$prof" "$KEY" "$JOB_CMD" "$job_bytes"
    lc_job_variants "$fx" "$prof" "$KEY"
    value_row bytes "$fx" "$prof" "job: bytes in the listed files" "$(mib "$job_bytes")" MiB "xargs -a job-files.txt stat -c %s"
    value_row bytes "$fx" "$prof" "actions/cache: bytes fetched" "$(mib "$abytes")" MiB "the whole archive"
  elif [ "$fx" = large ]; then
    lc_large_jobs "$fx" "$prof" "$KEY"
    value_row bytes "$fx" "$prof" "actions/cache: bytes fetched" "$(mib "$abytes")" MiB "the whole archive"
    # The cold full read of 2.3 GB would add minutes per link for a figure the node and mixed rows
    # already give.
    release_target
    return 0
  fi

  # cold full read: every file read once, right after the restore or mount.
  say "cold full read ($fx, $prof)"
  measure read_cold "$fx" "$prof" "actions/cache: curl, extract, read all" "$PREP_EMPTY" \
    '$CURL -o "$W/dl.tar.zst" "$E/$BUCKET/$OBJ" && zstd -dc "$W/dl.tar.zst" | tar -xf - -C "$JOBP" && '"$READ_ALL"
  if lc_has mount; then
    local PID_NOTE='p=$(lc_daemon_pid "$JOBD"); [ -n "$p" ] && note_add rss_peak_kib $(rss_kib $p VmHWM); '
    measure read_cold "$fx" "$prof" "lazycache mount, read all" "$PREP_MOUNT"'; B0=$(fetched_bytes)' \
      '"$LC" mount "${LC_STORE_OPTS[@]}" --key "$KEY" "$JOBD" && '"$READ_ALL" \
      'note_add fetched_bytes $(( $(fetched_bytes) - B0 )); note_add archive_bytes '"$abytes"'; '"$PID_NOTE"'sleep 5; [ -n "$p" ] && note_add rss_idle_kib $(rss_kib $p VmRSS); lc_unmount "$JOBD"; note_lc_figures'
  else
    not_measured read_cold "$fx" "$prof" "lazycache mount, read all" "$(lc_why mount)"
  fi
  release_target
}

# lc_job_rows SCEN FX PROF KEY JOBCMD JOB_BYTES: the ways of one job, each from the cold-tree
# state above: actions/cache (curl, extract, job), the job alone on a local tree (the reference of
# the cache overhead), lazycache restore --extract + job, lazycache mount + job + unmount.
lc_job_rows() {
  local scen=$1 fx=$2 prof=$3 KEY=$4 JOBX=$5 jbytes=$6
  say "partial job $scen ($fx, $prof)"
  measure "$scen" "$fx" "$prof" "actions/cache: curl, extract, job" "$PREP_COLD_TREE" \
    '$CURL -o "$W/dl.tar.zst" "$E/$BUCKET/$OBJ" && zstd -dc "$W/dl.tar.zst" | tar -xf - -C "$JOBP" && '"$JOBX"
  measure "$scen" "$fx" "$prof" "job alone on a local tree" "$PREP_ALONE$JOBX" "$JOBX"
  if lc_has restore && lc_has_opt restore --extract; then
    measure "$scen" "$fx" "$prof" "lazycache restore --extract, job" "$PREP_COLD_TREE" \
      '"$LC" restore "${LC_STORE_OPTS[@]}" $LC_RESTORE_FLAGS --key "$KEY" --extract "$JOBD" && '"$JOBX"
  else
    not_measured "$scen" "$fx" "$prof" "lazycache restore --extract, job" "$(lc_why restore) (or no --extract)"
  fi
  if lc_has mount; then
    measure "$scen" "$fx" "$prof" "lazycache mount, job, unmount" "$PREP_COLD_MOUNT"'; B0=$(fetched_bytes)' \
      '"$LC" mount "${LC_STORE_OPTS[@]}" --key "$KEY" "$JOBD" && '"$JOBX"' && lc_unmount "$JOBD"' \
      'note_add fetched_bytes $(( $(fetched_bytes) - B0 )); note_add job_file_bytes '"$jbytes"'; note_add archive_bytes '"$abytes"'; note_add tree_file_bytes '"$tree_file_bytes"'; note_lc_figures'
  else
    not_measured "$scen" "$fx" "$prof" "lazycache mount, job, unmount" "$(lc_why mount)"
  fi
}

# lc_learned SCEN FX PROF KEY JOBCMD JOB_BYTES: the second run of a job on the entry its first run
# saved (learned layout: the files it read first, in that order, prefetched at mount). The untimed
# first run mounts with a partial hit on the fixture's entries (--restore-keys KEY: every entry of
# that prefix holds the whole tree), runs the job and `unmount --save`s under a new key.
lc_learned() {
  local scen=$1 fx=$2 prof=$3 KEY=$4 JOBX=$5 jbytes=$6
  say "partial job, second run on the learned layout ($scen, $fx, $prof)"
  if ! lc_has mount || ! lc_has_opt unmount --save; then
    not_measured "$scen" "$fx" "$prof" "lazycache mount, job, unmount (second run)" "$(lc_why mount) (or no unmount --save)"
    return 0
  fi
  local FIRST_RUN='next_seq; '"$PREP_COLD_MOUNT"'; "$LC" mount "${LC_STORE_OPTS[@]}" --key "learned-$fx-$prof-$SEQ" --restore-keys "'"$KEY"'" "$JOBD" >>"$LOG" 2>&1 && '"$JOBX"' && "$LC" unmount --save "$JOBD" >>"$LOG" 2>&1; lc_unmount "$JOBD"; '"$PREP_COLD_MOUNT"'; B0=$(fetched_bytes)'
  measure "$scen" "$fx" "$prof" "lazycache mount, job, unmount (second run)" "$FIRST_RUN" \
    '"$LC" mount "${LC_STORE_OPTS[@]}" --key "learned-$fx-$prof-$SEQ" "$JOBD" && '"$JOBX"' && lc_unmount "$JOBD"' \
    'note_add fetched_bytes $(( $(fetched_bytes) - B0 )); note_add job_file_bytes '"$jbytes"'; note_add archive_bytes '"$abytes"'; note_add tree_file_bytes '"$tree_file_bytes"'; note_lc_figures'
}

# The large fixture's job: what it reads is measured once per link (job_share, on the local tree
# the job-alone rows leave), then its ways and its second run.
lc_large_jobs() {
  local fx=$1 prof=$2 KEY=$3 share tb
  eval "$PREP_ALONE" >>"$LOG" 2>&1
  share=$(job_share "$JOB_LARGE_CMD")
  tb=$(du -sb "$JOBD" | cut -f1)
  say "  job_large reads $(awk -v a="$share" -v b="$tb" 'BEGIN { printf "%.1f MiB of the tree'"'"'s %.1f MiB (%.1f %%)", a / 1048576, b / 1048576, 100 * a / b }')"
  value_row bytes "$fx" "$prof" "job: bytes of the tree it reads (page cache after a run on an evicted local tree)" "$(mib "$share")" MiB "job_share in bench/scenarios.sh"
  value_row bytes "$fx" "$prof" "job: share of the tree's bytes it reads" "$(awk -v a="$share" -v b="$tb" 'BEGIN { printf "%.1f", 100 * a / b }')" % "job_share / du -sb of the tree"
  lc_job_rows job_large "$fx" "$prof" "$KEY" "$JOB_LARGE_CMD" "$share"
  lc_learned job_large_learned "$fx" "$prof" "$KEY" "$JOB_LARGE_CMD" "$share"
}

# The node job's variants: a job that reads whole packages, and the second run of the scattered
# job on the entry its first run saved.
lc_job_variants() {
  local fx=$1 prof=$2 KEY=$3 pkg_bytes
  pkg_bytes=$(cd "$T" && xargs -a "$JOB_PKG_LIST" -d '\n' stat -c %s | awk '{ s += $1 } END { print s }')
  lc_job_rows job_pkg "$fx" "$prof" "$KEY" "$JOB_PKG_CMD" "$pkg_bytes"
  lc_learned job_learned "$fx" "$prof" "$KEY" "$JOB_CMD" "$job_bytes"
}

# ---- transfer rows: the seeds' payload through the link ----
# lazycache's concurrency x part size as cloud-cache-action's page sweeps them (label: flags).
# S3 upload parts are at least 5 MiB and `save` refuses --part-size 4M: that save row is run
# anyway and says "not measured" with lazycache's message (restores read 4 MiB ranges).
TRANSFER_SWEEP=(
  "1 request:--concurrency 1 --part-size 1G --memory-budget 4G"
  "8 x 4 MiB:--concurrency 8 --part-size 4M --memory-budget 1G"
  "8 x 8 MiB:--concurrency 8 --part-size 8M --memory-budget 1G"
  "8 x 16 MiB:--concurrency 8 --part-size 16M --memory-budget 1G"
  "16 x 8 MiB:--concurrency 16 --part-size 8M --memory-budget 1G"
  "32 x 16 MiB:--concurrency 32 --part-size 16M --memory-budget 1G"
)
# lc_sweep SCEN TOOL PREP CMD: one row per setting of $SWEEP ("label:flags"), @FLAGS@ in CMD
# replaced by the flags (uses run_transfer_scenarios' fx and prof).
lc_sweep() {
  local cfg
  for cfg in "${SWEEP[@]}"; do
    measure "$1" "$fx" "$prof" "$2, ${cfg%%:*}" "$3" "${4//@FLAGS@/${cfg#*:}}"
  done
}
# first_profile: whether the profile being measured ($prof) is the run's first (the full set of
# rows there; some costly repeats are left out on the others to keep the full run under 40 min).
first_profile() { [ "$prof" = "${PROFILES%% *}" ]; }
# run_transfer_scenarios FX PROF: save and restore --extract of the random payload; the sweep on
# the first link profile of the run (the seeds measure one same-region link), the default (auto)
# settings on every profile.
run_transfer_scenarios() {
  local fx=$1 prof=$2 T=${TREE[$1]}
  JOBP=$W/job-$fx JOBD=$W/job-$fx/$(basename "$T")
  if [ ! -d "$JOBD" ]; then fresh_target && cp -a "$T" "$JOBP/"; fi
  local N ARCH=$W/$fx.job.tar.zst OBJ="peer/$fx.tar.zst" abytes
  N=$(basename "$JOBD")
  [ -f "$ARCH" ] || tar -cf - -C "$JOBP" "$N" | zstd -q -T0 -3 -o "$ARCH"
  abytes=$(stat -c %s "$ARCH")
  say "transfer rows ($fx, $prof): payload $(mib "$(du -sb "$JOBD" | cut -f1)") MiB, archive $abytes bytes"
  $CURL -T "$ARCH" "$E/$BUCKET/$OBJ"
  lc_store
  local KEY=$fx-$prof
  SWEEP=("auto (default):")
  first_profile && SWEEP+=("${TRANSFER_SWEEP[@]}")

  measure transfer_save "$fx" "$prof" "tar | zstd -T0 -3, curl PUT" 'next_seq; rm -f "$W/up.tar.zst"' \
    'tar -cf - -C "$JOBP" "$N" | zstd -q -T0 -3 -o "$W/up.tar.zst" && $CURL -T "$W/up.tar.zst" "$E/$BUCKET/peer/$fx-$prof-$SEQ.tar.zst"'
  measure transfer_save "$fx" "$prof" "tar | zstd -T0 -3, rclone 8 x 8 MiB" 'next_seq; rm -f "$W/up.tar.zst"' \
    'tar -cf - -C "$JOBP" "$N" | zstd -q -T0 -3 -o "$W/up.tar.zst" && rclone copyto "$W/up.tar.zst" "s3:$BUCKET/peer/$fx-$prof-$SEQ-r.tar.zst" --s3-upload-concurrency 8 --s3-chunk-size 8M'
  if lc_has save && lc_has restore; then
    "$LC" save "${LC_STORE_OPTS[@]}" --key "$KEY" "$JOBD" >>"$LOG" 2>&1 || true
    lc_sweep transfer_save "lazycache save" 'next_seq' \
      '"$LC" save "${LC_STORE_OPTS[@]}" @FLAGS@ --key "$fx-$prof-$SEQ" "$JOBD"'
  else
    not_measured transfer_save "$fx" "$prof" "lazycache save, auto (default)" "$(lc_why save)"
  fi

  local PREP_EMPTY='fresh_target; rm -f "$W/dl.tar.zst"; drop_caches'
  restore_peer_rows transfer_restore
  if lc_has restore && lc_has_opt restore --extract; then
    lc_sweep transfer_restore "lazycache restore --extract" "$PREP_EMPTY" \
      '"$LC" restore "${LC_STORE_OPTS[@]}" $LC_RESTORE_FLAGS @FLAGS@ --key "$KEY" --extract "$JOBD"'
  else
    not_measured transfer_restore "$fx" "$prof" "lazycache restore --extract, auto (default)" "$(lc_why restore) (or no --extract)"
  fi
  value_row bytes "$fx" "$prof" "archive of the payload (tar | zstd -3)" "$(mib "$abytes")" MiB "stat -c %s"
  release_target
}

# lc_traced_job FX PROF (issue 17 item 6): the first run of a job on an entry saved from a plain
# directory after a traced job: the miss of a new key line. Untimed: the local tree, `lazycache
# trace start`, the job, `save` (which takes the trace as the hot list). Timed as the learned
# second run (lc_learned): mount, job, unmount; the goal is its time and bytes.
lc_traced_job() {
  local fx=$1 prof=$2 scen JOBX jbytes T=${TREE[$1]} abytes tree_file_bytes
  JOBP=$W/job-$fx JOBD=$W/job-$fx/$(basename "$T")
  case $fx in
    node) scen=job_traced JOBX=$JOB_CMD jbytes=$(cd "$T" && xargs -a "$JOB_LIST" -d '\n' stat -c %s | awk '{ s += $1 } END { print s }') ;;
    large) scen=job_large_traced JOBX=$JOB_LARGE_CMD; eval "$PREP_ALONE" >>"$LOG" 2>&1; jbytes=$(job_share "$JOB_LARGE_CMD") ;;
    *) return 0 ;;
  esac
  abytes=$(stat -c %s "$W/$fx.job.tar.zst")
  tree_file_bytes=$(find "$T" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
  lc_store
  say "partial job, first run after a traced save ($scen, $fx, $prof)"
  if ! lc_has trace || ! lc_has mount; then
    not_measured "$scen" "$fx" "$prof" "lazycache mount, job, unmount (first run after a traced save)" "$(lc_why trace)"
    return 0
  fi
  local SAVE_TRACED='next_seq; '"$PREP_ALONE"'"$LC" trace start "$JOBD" >>"$LOG" 2>&1 && '"$JOBX"' && "$LC" save "${LC_STORE_OPTS[@]}" --key "traced-$fx-$prof-$SEQ" "$JOBD" >>"$LOG" 2>&1; '"$PREP_COLD_MOUNT"'; B0=$(fetched_bytes)'
  measure "$scen" "$fx" "$prof" "lazycache mount, job, unmount (first run after a traced save)" "$SAVE_TRACED" \
    '"$LC" mount "${LC_STORE_OPTS[@]}" --key "traced-$fx-$prof-$SEQ" "$JOBD" && '"$JOBX"' && lc_unmount "$JOBD"' \
    'note_add fetched_bytes $(( $(fetched_bytes) - B0 )); note_add job_file_bytes '"$jbytes"'; note_add archive_bytes '"$abytes"'; note_add tree_file_bytes '"$tree_file_bytes"'; note_lc_figures'
  release_target
}

# ---- issue 17 item 4: an incremental save costs what changed ----
# lc_incremental_rows FX PROF: a full `lazycache save` of the fixture's tree from local disk (the
# base), then `unmount --save` of a mount of it (--restore-keys the base, --fill none, cold chunk
# cache) after one changed file (the 5000th in C-locale path order gets a line appended) and, on
# node, after 1 % of the files changed (every 100th). Notes: MiB the runner uploaded and read
# back (the save line; the store copied the rest), the changed files compressed (zstd -3) and
# the new entry's index + seek table (`lazycache info`), for report.py's goals.
lc_incremental_rows() {
  local fx=$1 prof=$2 T=${TREE[$1]} mode BASE
  if ! lc_has save || ! lc_has_opt unmount --save; then
    not_measured incr_save "$fx" "$prof" "lazycache unmount --save, one changed file" "$(lc_why save) (or no unmount --save)"
    return 0
  fi
  JOBP=$W/job-$fx JOBD=$W/job-$fx/$(basename "$T")
  fresh_target; cp -a "$T" "$JOBP/"
  (cd "$JOBD" && find . -type f -printf '%P\n' | LC_ALL=C sort) > "$W/incr-all.txt"
  lc_store
  say "incremental save ($fx, $prof)"
  measure incr_save "$fx" "$prof" "lazycache save (full, from local disk)" 'next_seq' \
    '"$LC" save "${LC_STORE_OPTS[@]}" --key "incr-$fx-$prof-$SEQ" "$JOBD"'
  BASE=incr-$fx-$prof-$SEQ
  local modes=(one)
  [ "$fx" = node ] && modes+=(1pct)
  for mode in "${modes[@]}"; do
    if [ "$mode" = one ]; then awk 'NR == 5000' "$W/incr-all.txt" > "$W/incr-picked.txt"
    else awk 'NR % 100 == 0' "$W/incr-all.txt" > "$W/incr-picked.txt"; fi
    local label="one changed file"
    [ "$mode" = 1pct ] && label="1 % of the files changed ($(wc -l < "$W/incr-picked.txt") files)"
    # Untimed: a mount of the base under a new key, the change made through it.
    local PREP_INCR='next_seq; fresh_target; mkdir -p "$JOBD"; lc_clear_cache; "$LC" mount "${LC_STORE_OPTS[@]}" --key "incr-$fx-$prof-new-$SEQ" --restore-keys "'"$BASE"'" --fill none "$JOBD" && (cd "$JOBD" && while read -r f; do printf "// changed\n" >> "$f"; done < "$W/incr-picked.txt")'
    local AFTER_INCR='l=$(grep "as key incr-$fx-$prof-new-$SEQ" "$LOG" | tail -1); note_add uploaded_mib "$(to_mib "$(sed -n "s/.*uploaded \([0-9.]* [KMGT]*i*B\) (.*/\1/p" <<<"$l")")"; note_add read_back_mib "$(to_mib "$(sed -n "s/.*uploaded [0-9.]* [KMGT]*i*B (\([0-9.]* [KMGT]*i*B\) of it read back.*/\1/p" <<<"$l")")"; note_add changed_zst_bytes "$(cd "'"$T"'" && tr "\n" "\0" < "$W/incr-picked.txt" | xargs -0 cat | zstd -q -3 -c | wc -c)"; note_add index_mib "$("$LC" info "${LC_STORE_OPTS[@]}" --key "incr-$fx-$prof-new-$SEQ" | awk "/^index \+ table:/ { v = \$4; u = \$5; print (u == \"KiB\" ? v / 1024 : u == \"B\" ? v / 1048576 : v) }")"'
    measure incr_save "$fx" "$prof" "lazycache unmount --save, $label" "$PREP_INCR" '"$LC" unmount --save "$JOBD"' "$AFTER_INCR"
  done
  release_target
}
