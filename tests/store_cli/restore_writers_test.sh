#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/store_cli/restore_writers_test.sh LAZYCACHE -- issue 16 item 3: `restore --extract` with
# several file writers (the default in a new target) restores exactly what GNU tar extracts from
# the stored object: files at every depth of a 40-level chain and in 60 directories, hardlinks
# across directories, a symlink to a directory followed by entries under that directory's name,
# absolute and dangling symlinks, empty, multi-frame and sparse files, read-only and setuid modes,
# mtimes. Also --writers 1 and an explicit --writers 8, and `extract` with --writers; a bad
# --writers value exits 2 before anything is written.
set -euo pipefail
LC=$1
command -v tar >/dev/null && command -v zstd >/dev/null || { echo "SKIP: needs GNU tar and zstd"; exit 0; }
W=$(mktemp -d /tmp/lc-restore-writers.XXXXXX)
trap 'chmod -R u+rwx "$W" 2>/dev/null; rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

T=$W/work/tree
mkdir -p "$T"
d=$T
for i in $(seq 1 40); do d=$d/l$i; mkdir "$d"; printf 'level %s\n' "$i" > "$d/f"; done
for s in $(seq 1 60); do
  mkdir "$T/s$s"
  for f in 1 2 3 4 5 6 7 8; do
    case $f in
      1) : > "$T/s$s/e$f" ;;                                          # empty
      2) printf 'x' > "$T/s$s/t$f"; chmod 444 "$T/s$s/t$f" ;;          # tiny, read-only
      3) head -c $((s * 37)) /dev/urandom > "$T/s$s/r$f"; chmod 755 "$T/s$s/r$f" ;;
      *) seq 1 $((s * f)) > "$T/s$s/n$f" ;;
    esac
  done
  touch -d "@$((1600000000 + s))" "$T/s$s/n4"
done
chmod 4755 "$T/s7/r3"
head -c $((5 << 20)) /dev/urandom > "$T/big"                           # spans frames
truncate -s 3M "$T/sparse"; printf 'tail' >> "$T/sparse"
ln "$T/s1/n5" "$T/l1/l2/hard"; ln "$T/s1/n5" "$T/s60/hard"            # across directories
ln -s zdir "$T/adir"; mkdir "$T/zdir"; echo z > "$T/zdir/entry"        # symlink sorts first
ln -s /usr/bin/python3 "$T/s3/python3"; ln -s ../nowhere "$T/s4/dangling"
chmod 500 "$T/l1/l2/l3"

snapshot() {  # type, mode, link target, mtime (not of symlinks), content, hardlink groups
  (cd "$1" && find . -printf '%y %m %n %p -> %l\n' | sort && find . ! -type l -printf '%p %T@\n' | sort &&
   find . -type f -print0 | sort -z | xargs -0 sha256sum &&
   find . -type f -links +1 -printf '%i %p\n' | sort -k2 | awk '{ g[$1] = g[$1] " " $2 } END { for (k in g) print g[k] }' | sort)
}
"$LC" save --store "$W/store" --key w "$T" > "$W/save.out" 2>&1 || fail "save: $(cat "$W/save.out")"
obj=$(find "$W/store" -type f -size +1M | sed -n 1p)  # not head: SIGPIPE under pipefail
[ -n "$obj" ] || fail "no archive object in the store"
mkdir "$W/gnu"
zstd -dcq "$obj" | tar -x -C "$W/gnu" || fail "GNU tar could not extract the object"
G=$W/gnu/${T#/}
snapshot "$G" > "$W/ref"
diff <(snapshot "$T") "$W/ref" > /dev/null || fail "GNU tar's tree differs from the original (test bug)"

restored() {  # restored WHAT ARGS...: restore into the empty saved path, compare with GNU tar's
  local what=$1; shift
  chmod -R u+rwx "$T"; rm -rf "$T"
  "$LC" restore --store "$W/store" --key w --extract "$@" > "$W/out" 2>&1 || { cat "$W/out"; fail "$what: restore failed"; }
  diff "$W/ref" <(snapshot "$T") > "$W/diff" || { head -20 "$W/diff"; fail "$what: differs from GNU tar's extraction"; }
}
restored "default writers"
# The staged tree is flagged chattr +T while it is built (ext4 spreads its directories over block
# groups); the published tree is not.
if flags=$(lsattr -d "$T" 2>/dev/null); then
  case ${flags%% *} in *T*) fail "the restored tree kept the directory-spread flag: $flags" ;; esac
fi
restored "--writers 1" --writers 1
restored "--writers 8" --writers 8

# extract, the archive-side command, shares the engine and the option.
mkdir "$W/x"
"$LC" extract --writers 8 -C "$W/x/new" "$obj" > "$W/out" 2>&1 || { cat "$W/out"; fail "extract --writers 8 failed"; }
diff "$W/ref" <(snapshot "$W/x/new/${T#/}") > "$W/diff" || { head -20 "$W/diff"; fail "extract --writers 8 differs from GNU tar's"; }

# A bad value is a usage error, and nothing is written.
chmod -R u+rwx "$T"; rm -rf "$T"
set +e
"$LC" restore --store "$W/store" --key w --extract --writers 65 > "$W/out" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || { cat "$W/out"; fail "--writers 65 exited $rc, not 2"; }
grep -q -- "--writers" "$W/out" || fail "the error does not name --writers: $(cat "$W/out")"
[ ! -e "$T" ] || fail "--writers 65 wrote $T"
echo "PASS"
