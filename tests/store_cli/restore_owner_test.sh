#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/store_cli/restore_owner_test.sh LAZYCACHE -- `restore --extract` and `extract` are one
# engine with the same options: run as root, both restore every entry's uid and gid as saved
# (as GNU tar does as root), files, directories and symlinks, into a new target and over an
# existing one, keeping setuid/setgid bits that a chown would clear; --no-same-owner leaves
# everything owned by the extracting user. Entries saved with root's ids (the common case) need
# no chown; the tree must still be exactly GNU tar's.
set -euo pipefail
LC=$1
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (chown)"; exit 0; }
command -v tar >/dev/null && command -v zstd >/dev/null || { echo "SKIP: needs GNU tar and zstd"; exit 0; }
W=$(mktemp -d /tmp/lc-restore-owner.XXXXXX)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

T=$W/work/tree
mkdir -p "$T/pkg/sub" "$T/theirs" "$T/mine"
echo a > "$T/pkg/a"; echo b > "$T/pkg/sub/b"; echo r > "$T/mine/root-file"
seq 1 100 > "$T/theirs/data"; : > "$T/theirs/empty"
printf '#!/bin/sh\n' > "$T/theirs/suid"; chown 1234:5678 "$T/theirs/suid"; chmod 6755 "$T/theirs/suid"
chown -R 1234:5678 "$T/pkg"
chown 4321:4321 "$T/theirs" "$T/theirs/data"
chown 0:5678 "$T/theirs/empty"
ln -s ../pkg/a "$T/mine/link"; chown -h 2222:3333 "$T/mine/link"
ln -s /usr/bin/env "$T/mine/root-link"
chown 777:888 "$T"

snapshot() {  # owner, group, type, mode of every entry (symlinks too), relative
  (cd "$1" && find . -printf '%U:%G %y %m %p\n' | sort)
}
"$LC" save --store "$W/store" --key o "$T" > "$W/save.out" 2>&1 || fail "save: $(cat "$W/save.out")"
obj=$(find "$W/store" -type f -size +1k | sed -n 1p)  # not head: SIGPIPE under pipefail
[ -n "$obj" ] || fail "no archive object in the store"
mkdir "$W/gnu"
zstd -dcq "$obj" | tar -x -C "$W/gnu" || fail "GNU tar could not extract the object"
G=$W/gnu/${T#/}
snapshot "$G" > "$W/ref"
diff <(snapshot "$T") "$W/ref" > /dev/null || fail "GNU tar's tree differs from the original (test bug)"
grep -q '^1234:5678 f 6755 ./theirs/suid$' "$W/ref" || fail "reference lacks the setuid file owned by 1234 (test bug)"

same() {  # same WHAT DIR: DIR's owners and modes are GNU tar's
  diff "$W/ref" <(snapshot "$2") > "$W/diff" || { head -20 "$W/diff"; fail "$1: owners or modes differ from GNU tar's"; }
}
rm -rf "$T"
"$LC" restore --store "$W/store" --key o --extract > "$W/out" 2>&1 || { cat "$W/out"; fail "restore failed"; }
same "restore --extract into a new target" "$T"
# Over the existing tree (no staging: every entry chowned).
chown -R 0:0 "$T"
"$LC" restore --store "$W/store" --key o --extract > "$W/out" 2>&1 || { cat "$W/out"; fail "restore over the tree failed"; }
same "restore --extract over an existing tree" "$T"
"$LC" extract -C "$W/x" "$obj" > "$W/out" 2>&1 || { cat "$W/out"; fail "extract failed"; }
same "extract" "$W/x/${T#/}"

# Into a setgid parent owned by another group, new entries inherit that group: the ones saved as
# root's must still be chowned back (the skip applies only where creating gives the saved ids).
rm -rf "$T"
chgrp 4444 "$W/work"; chmod g+s "$W/work"
"$LC" restore --store "$W/store" --key o --extract > "$W/out" 2>&1 || { cat "$W/out"; fail "restore into a setgid parent failed"; }
same "restore --extract into a setgid parent" "$T"
chgrp 0 "$W/work"; chmod g-s "$W/work"

# --no-same-owner: everything is root's, modes as saved (the setuid bits too).
rm -rf "$T"
"$LC" restore --store "$W/store" --key o --extract --no-same-owner > "$W/out" 2>&1 || { cat "$W/out"; fail "restore --no-same-owner failed"; }
snapshot "$T" > "$W/noown"
[ "$(cut -d' ' -f1 "$W/noown" | sort -u)" = "0:0" ] || fail "--no-same-owner restored owners: $(grep -v '^0:0' "$W/noown" | sed -n 1p)"
diff <(cut -d' ' -f2- "$W/ref" | sort) <(cut -d' ' -f2- "$W/noown" | sort) > "$W/diff" || { head "$W/diff"; fail "--no-same-owner: modes differ"; }
echo "PASS"
