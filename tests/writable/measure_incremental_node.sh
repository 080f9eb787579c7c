#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# By hand, not a CTest: incremental `unmount --save` against a full pack on the node fixture
# (bench/make-fixture-node.sh DIR makes DIR/node_modules). Local-directory store under /tmp.
# Usage: measure_incremental_node.sh LAZYCACHE FIXTURE_DIR [clustered|scattered|one]
#   clustered: 1 % of the files, consecutive in sorted path order (a package upgrade);
#   scattered: every 100th file (the worst case for frame reuse);
#   one: one file (the 5000th in sorted path order).
# Prints: a full save from disk, the incremental unmount --save after the change, whether the
# new entry restores identically with zstd -d | tar -x, and a full pack through the mount (what
# unmount --save did before it was incremental).
set -euo pipefail
LC=$1 FIX=$2 MODE=${3:-clustered}
W=/tmp/incr-node-$MODE
rm -rf "$W"; mkdir -p "$W/src"
export LAZYCACHE_RUN_DIR=$W/run LAZYCACHE_CACHE_DIR=$W/cache/chunks LAZYCACHE_STORE=$W/store
P=$W/src/node_modules
trap 'if mountpoint -q "$P"; then "$LC" unmount "$P" > /dev/null || true; fi' EXIT
cp -a "$FIX/node_modules" "$P"
echo "== full save from disk"; /usr/bin/time -f "%e s wall, %U s user" "$LC" save --key node-v1 "$P"
mv "$P" "$W/twin"; mkdir "$P"
pick() { (cd "$1" && find . -type f | LC_ALL=C sort > "$W/all"); n=$(( $(wc -l < "$W/all") / 100 ))
        case $MODE in clustered) awk -v n=$n 'NR > 5000 && NR <= 5000 + n' "$W/all" ;; one) awk 'NR == 5000' "$W/all" ;;
                      *) awk 'NR % 100 == 0' "$W/all" ;; esac; }
pick "$W/twin" > "$W/picked"
echo "picked $(wc -l < "$W/picked") files, $(cd "$W/twin" && tr '\n' '\0' < "$W/picked" | xargs -0 cat | wc -c) bytes"
changes() { (cd "$1" && while read -r f; do printf '// changed\n' >> "$f"; done < "$W/picked"); }
"$LC" mount --key node-v2 --restore-keys node- "$P" | grep matched
changes "$P"
echo "== incremental unmount --save"; /usr/bin/time -f "%e s wall, %U s user" "$LC" unmount --save "$P"
changes "$W/twin"
mkdir "$W/x" && zstd -q -d < "$(ls "$W/store"/node-v2\!*.tar.zst)" | tar -x -C "$W/x"
diff -r "$W/twin" "$W/x/${P#/}" > /dev/null && echo "restore: identical content" || echo "restore: DIFFERS"
"$LC" mount --key node-v4 --restore-keys node-v1 "$P" | grep matched
changes "$P"
echo "== full pack through the mount (the old unmount --save path)"; /usr/bin/time -f "%e s wall, %U s user" "$LC" save --key node-full "$P"
"$LC" unmount "$P" >/dev/null
rm -rf "$W"
