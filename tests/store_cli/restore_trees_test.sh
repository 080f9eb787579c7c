#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/store_cli/restore_trees_test.sh LAZYCACHE -- issue 16: trees a CI caches restore as GNU tar
# restores them. A venv-shaped and a JDK-shaped tree (absolute, relative, dangling, chained and
# escaping symlinks, a symlink to a directory whose name sorts before the directory's entries)
# are saved to a local store; `restore --extract` must give exactly what `zstd -dc | tar -x` of
# the stored object gives, at the saved paths and at other PATHs (mapped as mount maps them);
# --no-external-symlinks must refuse before writing anything; a second restore over the first
# must succeed unchanged; --json and --verbose give the restore's timeline, its steps in order.
set -euo pipefail
LC=$1
command -v tar >/dev/null && command -v zstd >/dev/null || { echo "SKIP: needs GNU tar and zstd"; exit 0; }
W=$(mktemp -d /tmp/lc-restore-trees.XXXXXX)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
lc() { "$LC" "$@"; }

V=$W/work/venv J=$W/work/jdk
mkdir -p "$V/bin" "$V/lib/python3.11/site-packages/pkg" "$V/zlib"
echo '# activate' > "$V/bin/activate"
ln -s /usr/bin/python3 "$V/bin/python3"            # absolute
ln -s python3 "$V/bin/python"                      # relative, chained to the absolute one
ln -s python "$V/bin/python3.11"                   # a chain of two
ln -s lib "$V/lib64"                               # a symlink to a directory
echo 'x = 1' > "$V/lib/python3.11/site-packages/pkg/__init__.py"
ln -s zlib "$V/alib"                               # sorts before the directory it names
echo 'z' > "$V/zlib/entry"
ln -s ../nowhere/at/all "$V/include"               # dangling, escaping
printf 'home = /usr/bin\n' > "$V/pyvenv.cfg"
mkdir -p "$J/conf/security" "$J/lib/server" "$J/bin" "$J/legal"
ln -s /etc/java-17-openjdk/security/java.security "$J/conf/security/java.security"  # absolute, dangling
ln -s /etc/java-17-openjdk/logging.properties "$J/conf/logging.properties"
head -c 300000 /dev/urandom > "$J/lib/server/libjvm.so"
ln -s server/libjvm.so "$J/lib/libjvm.so"
printf '#!/bin/sh\n' > "$J/bin/java"; chmod 755 "$J/bin/java"
ln -s ../../../../../../usr/share/doc "$J/legal/java.base"  # climbs far above the tree
ln -s ../bin "$J/lib/bin-up"                       # climbs one level, stays inside
echo 'JAVA_VERSION="17"' > "$J/release"; chmod 444 "$J/release"

snapshot() {  # type, mode, link target, mtime (not of symlinks), content of every entry, relative
  (cd "$1" && find . -printf '%y %m %p -> %l\n' | sort && find . ! -type l -printf '%p %T@\n' | sort &&
   find . -type f -print0 | sort -z | xargs -0 sha256sum)
}
lc save --store "$W/store" --key trees "$V" "$J" > "$W/save.out" || fail "save: $(cat "$W/save.out")"
# GNU tar's restore of the stored object is the reference.
obj=$(find "$W/store" -type f -size +100k | sed -n 1p)  # not head: SIGPIPE under pipefail
[ -n "$obj" ] || fail "no archive object in the store"
mkdir "$W/gnu"
zstd -dcq "$obj" | tar -x -C "$W/gnu" || fail "GNU tar could not extract the object"
GV=$W/gnu/${V#/} GJ=$W/gnu/${J#/}
[ -L "$GV/bin/python3" ] || fail "reference lacks the venv's absolute symlink"
snapshot "$V" > "$W/v.orig"; snapshot "$J" > "$W/j.orig"
diff "$W/v.orig" <(snapshot "$GV") >/dev/null || fail "GNU tar's venv differs from the original (test bug)"

check() {  # check VENV JDK what
  diff <(snapshot "$GV") <(snapshot "$1") > "$W/diff" || { head -20 "$W/diff"; fail "$3: venv differs from GNU tar's"; }
  diff <(snapshot "$GJ") <(snapshot "$2") > "$W/diff" || { head -20 "$W/diff"; fail "$3: jdk differs from GNU tar's"; }
}

# 1. At the saved paths, into nothing.
rm -rf "$W/work"
lc restore --extract --store "$W/store" --key trees > "$W/r1.out" 2>&1 || fail "restore: $(cat "$W/r1.out")"
check "$V" "$J" "restore at the saved paths"
# 2. Again over the restored trees: same result.
lc restore --extract --store "$W/store" --key trees > "$W/r2.out" 2>&1 || fail "second restore: $(cat "$W/r2.out")"
check "$V" "$J" "restore over a restored tree"
# 3. Elsewhere (--any-paths: other paths are another entry's identity): PATHs take the roots in
# order, as mount maps them.
lc restore --extract --any-paths --store "$W/store" --key trees "$W/else/v" "$W/else/j" > "$W/r3.out" 2>&1 || fail "restore to PATHs: $(cat "$W/r3.out")"
check "$W/else/v" "$W/else/j" "restore to other PATHs"
# A single PATH that is neither saved nor one per root: refused, nothing made.
if lc restore --extract --any-paths --store "$W/store" --key trees "$W/lone" > "$W/r4.out" 2>&1; then fail "one unknown PATH restored"; fi
grep -q "saved paths" "$W/r4.out" || fail "refusal does not list the saved paths: $(cat "$W/r4.out")"
[ ! -e "$W/lone" ] || fail "refused restore created $W/lone"
# 4. Refusing external symlinks: refused before anything is written, no partial tree.
rm -rf "$W/work"
if lc restore --extract --no-external-symlinks --store "$W/store" --key trees > "$W/r5.out" 2>&1; then fail "--no-external-symlinks restored"; fi
grep -q "outside the extraction directory" "$W/r5.out" || fail "unexpected refusal: $(cat "$W/r5.out")"
[ ! -e "$V" ] && [ ! -e "$J" ] || fail "refused restore left a partial tree: $(find "$W/work" | head)"
# 5. The timeline (--json, --verbose): every step, in order, never going back; the tree as before.
lc restore --extract --json --verbose --store "$W/store" --key trees > "$W/r6.json" 2> "$W/r6.err" || fail "restore --json: $(cat "$W/r6.err")"
check "$V" "$J" "restore with --json --verbose"
steps=$(sed -n 's/.*"timeline":{\([^}]*\)}.*/\1/p' "$W/r6.json")
[ -n "$steps" ] || fail "no timeline in $(cat "$W/r6.json")"
[ "$(echo "$steps" | tr ',' '\n' | sed 's/"\([a-z_]*\)":.*/\1/' | tr '\n' ' ')" = "lookup_ms tail_ms first_data_ms last_data_ms extract_ms released_ms " ] ||
  fail "timeline steps: $steps"
echo "$steps" | tr ',' '\n' | sed 's/.*://' | sort -n -c || fail "timeline goes back: $steps"
grep -q "^lazycache restore: timeline: lookup [0-9]* ms, tail [0-9]* ms, first_data" "$W/r6.err" || fail "--verbose: $(cat "$W/r6.err")"
echo "ok"
