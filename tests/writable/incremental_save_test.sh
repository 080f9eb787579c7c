#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Incremental `unmount --save` end to end, with a local-directory store:
#  - save a tree of ~3000 files (64 KiB frames, so 1 % of the tree is a few frames, not a
#    fraction of one), mount it under a new key with --restore-keys, read a few files;
#  - change ~1 % of the files (rewrite one package, add one, delete one, chmod one);
#  - unmount --save: the save line must say the save was incremental, with about the changed
#    bytes compressed (they plus at most a few neighbouring frames) and the rest of the frames
#    reused, taken from the chunk cache or the store (LAZYCACHE_STORE_COPY=0: not copied by it);
#  - the new entry restores with stock `zstd -d | tar -x` byte-identical to a plain twin given
#    the same changes, and `lazycache verify` passes.
# Skipped (exit 0, with a message) when FUSE cannot be used. Usage: incremental_save_test.sh LAZYCACHE
set -euo pipefail
. "$(dirname "$0")/cli_test_lib.sh"
cli_test_setup "$1" lc-incr-save

# 30 packages x 100 files of 1-7 KiB, text-like (compressible, but not trivially).
mkdir -p "$P"
python3 - "$P" <<'EOF'
import os, random, sys
rng = random.Random(7)
words = [''.join(rng.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(rng.randint(2, 9))) for _ in range(4000)]
for p in range(30):
    d = os.path.join(sys.argv[1], 'pkg-%02d' % p, 'lib')
    os.makedirs(d)
    for f in range(100):
        n = rng.randint(1000, 7000)
        text = ' '.join(rng.choice(words) for _ in range(n // 5))[:n]
        with open(os.path.join(d, 'f%03d.js' % f), 'w') as out:
            out.write(text)
EOF
"$LC" save --key deps-v1 --frame-size 64K "$P" > "$W/out" || fail "save: $(cat "$W/out")"
mkdir "$W/twin"
zstd -q -d < "$(entry_file deps-v1)" | tar -x -C "$W/twin"
T=$W/twin/${P#/}
rm -rf "$P" && mkdir -p "$P"

# A chunk cache of its own (not $LAZYCACHE_CACHE_DIR): unmount --save must read base frames
# from the one the daemon used.
"$LC" mount --key deps-v2 --restore-keys deps- --cache-dir "$W/job-cache" --fill none "$P" > "$W/out"
grep -q "cache-matched-key=deps-v1" "$W/out" || fail "restore-key mount: $(cat "$W/out")"
cat "$P"/pkg-03/lib/f00*.js > /dev/null  # the job reads a little
# ~1 % of the files: 30 rewritten in one package (as an upgrade does), 10 new, 1 deleted, 1 chmod.
changes() {
  for f in $(seq -w 0 29); do printf 'upgraded %s\n' "$f" >> "$1/pkg-11/lib/f0$f.js"; done
  mkdir -p "$1/pkg-new/lib"
  for f in $(seq 1 10); do seq 1 $((f * 300)) > "$1/pkg-new/lib/n$f.js"; done
  rm "$1/pkg-20/lib/f050.js"
  chmod 600 "$1/pkg-25/lib/f010.js"
}
changes "$P"
changes "$T"
changed_bytes=$(cat "$T"/pkg-11/lib/f00*.js "$T"/pkg-11/lib/f01*.js "$T"/pkg-11/lib/f02*.js "$T"/pkg-new/lib/*.js "$T"/pkg-25/lib/f010.js | wc -c)
# Frames through this machine (the store's copies are tested in save_naming_test.sh): from the
# mount's chunk cache where the job read them, else from the store.
LAZYCACHE_STORE_COPY=0 "$LC" unmount --save "$P" > "$W/out"
cat "$W/out"
line=$(grep "saved .* as key deps-v2" "$W/out") || fail "save of the changed mount: $(cat "$W/out")"
# The size is written by the CLI's byte formatter: B, KiB, MiB or GiB.
[[ $line =~ ([0-9]+)\ frames\ reused\ /\ ([0-9]+)\ compressed\ \(([0-9.]+)\ (B|KiB|MiB|GiB)\ compressed ]] ||
  fail "the save did not report incremental counts: $line"
reused=${BASH_REMATCH[1]} compressed=${BASH_REMATCH[2]} size=${BASH_REMATCH[3]} unit=${BASH_REMATCH[4]}
[[ $line =~ ([0-9]+)\ from\ the\ chunk\ cache,\ ([0-9]+)\ from\ the\ store ]] || fail "no base frame sources: $line"
from_cache=${BASH_REMATCH[1]} from_store=${BASH_REMATCH[2]}
total=$(du -b "$W/twin" --apparent-size -s | cut -f1)
# Compressed: the changed bytes, plus at most 2 neighbouring 64 KiB frames per changed region
# (pkg-11, pkg-new, the chmod; the deletion only drops a member) and the last frame; plus the
# files the job read (pkg-03), which this first save after a new learned order lays out first,
# and the 2 frames they are taken out of.
read_bytes=$(cat "$T"/pkg-03/lib/f00*.js | wc -c)
limit=$((changed_bytes + read_bytes + 10 * 65536))
compressed_bytes=$(awk -v v="$size" -v u="$unit" 'BEGIN { f = u == "GiB" ? 1073741824 : u == "MiB" ? 1048576 : u == "KiB" ? 1024 : 1; printf "%d", v * f }')
echo "changed ${changed_bytes} B of ${total} B; compressed ${compressed_bytes} B (limit ${limit}); frames ${reused} reused / ${compressed} compressed; base frames ${from_cache} cache / ${from_store} store"
[ "$compressed_bytes" -le "$limit" ] || fail "compressed $compressed_bytes bytes for $changed_bytes changed"
[ "$compressed_bytes" -ge $((changed_bytes / 2)) ] || fail "compressed less than the changed bytes: $line"
[ "$reused" -ge $((compressed * 10)) ] || fail "too few frames reused: $line"
[ $((from_cache + from_store)) -eq "$reused" ] || fail "every reused frame comes from the cache or the store: $line"
[ "$from_store" -gt 0 ] || fail "frames the job never read must come from the store: $line"
[ "$from_cache" -gt 0 ] || fail "frames the job read must come from the mount's chunk cache ($W/job-cache): $line"

listing "$T" > "$W/expected"
mkdir "$W/restored"
zstd -q -d < "$(entry_file deps-v2)" | tar -x -C "$W/restored"
listing "$W/restored/${P#/}" > "$W/restored.list"
diff "$W/expected" "$W/restored.list" > "$W/diff" || fail "zstd | tar restore differs from the twin: $(head -5 "$W/diff")"
"$LC" verify "$(entry_file deps-v2)" > "$W/out" 2>&1 || fail "verify: $(cat "$W/out")"
# The chmod'ed file's old member stays behind in its copied frame, superseded (info says so).
"$LC" info "$(entry_file deps-v2)" > "$W/out" 2>&1 || fail "info: $(cat "$W/out")"
grep -q "^dead members: " "$W/out" || fail "no dead members in the incremental entry: $(cat "$W/out")"

# Metadata changes (issue 17 item 4: the new tree is built from the base index and upper/, not a
# scan of the mount; LAZYCACHE_SAVE_CROSSCHECK=1 from cli_test_lib.sh also scans the mount and
# fails the save if the two trees differ): mtime of a file and of a directory, an xattr, a
# renamed directory, a hardlink to a base file, a deleted directory, a file deleted and made
# again, a directory replaced (opaque), a chmod'ed directory, a new symlink and empty directory.
"$LC" mount --key deps-v4 --restore-keys deps-v2 --fill none "$P" > "$W/out" || fail "mount deps-v4: $(cat "$W/out")"
xattrs=0
if setfattr -n user.probe -v 1 "$P/pkg-06/lib/f002.js" 2>/dev/null; then xattrs=1; setfattr -x user.probe "$P/pkg-06/lib/f002.js"; fi
meta_changes() {
  touch -d '2020-01-02 03:04:05' "$1/pkg-05/lib/f001.js"
  [ $xattrs = 0 ] || setfattr -n user.lc -v hello "$1/pkg-06/lib/f002.js"
  mv "$1/pkg-07" "$1/pkg-07-renamed"
  ln "$1/pkg-08/lib/f000.js" "$1/pkg-08/lib/f000-link.js"
  rm -r "$1/pkg-09"
  rm "$1/pkg-10/lib/f001.js" && echo again > "$1/pkg-10/lib/f001.js"
  rm -r "$1/pkg-12/lib" && mkdir "$1/pkg-12/lib" && echo only > "$1/pkg-12/lib/only.js"
  chmod 700 "$1/pkg-13"
  ln -s ../pkg-01 "$1/pkg-14/link"
  mkdir "$1/pkg-15/empty"
  touch -d '2021-05-06 07:08:09' "$1/pkg-16/lib"
}
meta_changes "$P"
meta_changes "$T"
"$LC" unmount --save "$P" > "$W/out" 2> "$W/err" || fail "save of the metadata changes: $(cat "$W/out" "$W/err")"
grep -q "saved .* as key deps-v4: .* frames reused" "$W/out" || fail "the metadata save was not incremental: $(cat "$W/out" "$W/err")"
listing "$T" > "$W/expected"
mkdir "$W/restored4"
zstd -q -d < "$(entry_file deps-v4)" | tar --xattrs -x -C "$W/restored4"
R=$W/restored4/${P#/}
listing "$R" > "$W/restored.list"
diff "$W/expected" "$W/restored.list" > "$W/diff" || fail "metadata changes: zstd | tar restore differs from the twin: $(head -5 "$W/diff")"
[ "$(stat -c %Y "$R/pkg-05/lib/f001.js")" = "$(stat -c %Y "$T/pkg-05/lib/f001.js")" ] || fail "a file's mtime was not saved"
[ "$(stat -c %Y "$R/pkg-16/lib")" = "$(stat -c %Y "$T/pkg-16/lib")" ] || fail "a directory's mtime was not saved"
if [ $xattrs = 1 ]; then
  [ "$(getfattr --absolute-names --only-values -n user.lc "$R/pkg-06/lib/f002.js" 2>/dev/null)" = hello ] || fail "an xattr set in the mount was not saved"
fi
[ "$(stat -c %i "$R/pkg-08/lib/f000.js")" = "$(stat -c %i "$R/pkg-08/lib/f000-link.js")" ] || fail "a new hardlink was not saved as one"
"$LC" verify "$(entry_file deps-v4)" > "$W/out" 2>&1 || fail "verify deps-v4: $(cat "$W/out")"

# One changed file: the save reads upper/ and the base index, not the merged view. strace
# counts the stat calls on names of the tree; a scan of the mount makes one per entry (3000+);
# and the chunk cache's directories, which a save that fetches no base frame never opens.
"$LC" mount --key deps-v5 --restore-keys deps-v4 --fill none "$P" > "$W/out" || fail "mount deps-v5: $(cat "$W/out")"
echo one >> "$P/pkg-02/lib/f003.js"
echo one >> "$T/pkg-02/lib/f003.js"
if command -v strace > /dev/null; then
  # (LeakSanitizer cannot run under ptrace: leaks are checked by the other saves.)
  ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 LAZYCACHE_SAVE_CROSSCHECK=0 strace -f -o "$W/strace" -e trace=newfstatat,fstatat64,statx,lstat,stat,getdents64,mkdir,mkdirat,open,openat \
    "$LC" unmount --save "$P" > "$W/out" 2> "$W/err" || fail "save of one change: $(cat "$W/out" "$W/err")"
  stats=$(grep -c '\.js"' "$W/strace" || true)
  echo "stat calls on the tree's files during unmount --save: $stats"
  [ "$stats" -lt 100 ] || fail "unmount --save of one change stat-ed $stats files of the tree (a scan of the mount)"
  # Every reused frame is copied by the store here, so the save never opens the chunk cache
  # (an LMDB environment, its check, and a mkdir per blob directory: 256+ calls).
  mkdirs=$(grep -c 'mkdir.*/blobs/' "$W/strace" || true)
  [ "$mkdirs" -eq 0 ] || fail "unmount --save opened the chunk cache although it fetched no frame ($mkdirs mkdir calls under blobs/)"
  # The changed file is read from upper/, not through the mount (issue 17): opened by its upper
  # path, never by name under the mount point.
  grep -q 'open.*/upper/pkg-02/lib/f003.js"' "$W/strace" || fail "the changed file was not read from upper/: $(grep f003 "$W/strace" | head -5)"
  if grep -E 'openat\([0-9]+, "f003.js"|open.*"'"$P"'/pkg-02/lib/f003.js"' "$W/strace" | grep -v '/upper/' | grep -q .; then
    fail "the changed file was read through the mount: $(grep f003 "$W/strace" | head -5)"
  fi
else
  echo "strace not installed: the stat count of unmount --save is not checked"
  LAZYCACHE_SAVE_CROSSCHECK=0 "$LC" unmount --save "$P" > "$W/out" 2> "$W/err" || fail "save of one change: $(cat "$W/out" "$W/err")"
fi
grep -q "saved .* as key deps-v5: .* frames reused" "$W/out" || fail "the one-change save was not incremental: $(cat "$W/out" "$W/err")"
listing "$T" > "$W/expected"
mkdir "$W/restored5"
zstd -q -d < "$(entry_file deps-v5)" | tar -x -C "$W/restored5"
listing "$W/restored5/${P#/}" > "$W/restored.list"
diff "$W/expected" "$W/restored.list" > "$W/diff" || fail "one change: zstd | tar restore differs from the twin: $(head -5 "$W/diff")"

# A base that cannot be used (the entry mounted at another path than it was saved from: none of
# its members can be reused) falls back to a full pack, says why, and still saves.
"$LC" unmount "$P" > /dev/null 2>&1 || true
Q=$W/elsewhere/deps
mkdir -p "$Q"
P=$Q  # the EXIT trap unmounts $P
"$LC" mount --any-paths --key deps-v3 --restore-keys deps-v5 "$Q" > /dev/null  # other paths: --any-paths
echo more >> "$Q/pkg-01/lib/f001.js"
"$LC" unmount --save "$Q" > "$W/out" 2> "$W/err" || fail "fallback save: $(cat "$W/out" "$W/err")"
grep -q "incremental save not possible (.*none of the saved paths" "$W/err" || fail "no fallback message: $(cat "$W/err")"
grep -q "saved .* as key deps-v3" "$W/out" || fail "fallback did not save: $(cat "$W/out")"
grep -q "frames reused" "$W/out" && fail "a full pack must not report reuse: $(cat "$W/out")"
mkdir "$W/restored3"
zstd -q -d < "$(entry_file deps-v3 "$Q")" | tar -x -C "$W/restored3"
tail -c 5 "$W/restored3/${Q#/}/pkg-01/lib/f001.js" | grep -q more || fail "the fallback save lost the change"
echo "OK"
