#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make-fixture-large.sh DIR [LIST] -- a CI cache of real size in DIR/tree: the Debian packages of
# LIST (default bench/fixture-large/packages.txt, one "name version" a line, every version pinned)
# downloaded with `apt-get download name=version` and unpacked with `dpkg-deb -x`, in list order.
# The default list (a JDK, LLVM 15, Go 1.19, Rust 1.63's std, GCC 12, Boost headers, kernel
# headers, git, a Python 3.11 scientific stack) unpacks to about 2.3 GB in about 50,000 files:
# many small files (headers, .py, Go sources), large binaries and shared objects that programs map
# and read only in part (lib/modules of the JDK, libLLVM-15.so), absolute and relative symlinks
# (Debian packages have both: 25 and 395 here) and hardlinks (made below from duplicate files).
#
# The same list gives the same tree on every machine: apt verifies each .deb against the archive's
# hashes, and DIR/manifest.txt (type, mode, size, link count, symlink target, SHA-256 and path of
# every entry, C-locale order) records it; bench_fixture_test builds a small list twice and
# compares the manifests. A pinned version the mirror no longer carries fails the build with its
# name: re-pin it with `apt-cache show --no-all-versions NAME`.
# The .debs are kept in DIR/debs; the tree is reused while DIR/.fixture-stamp matches the list.
set -euo pipefail
# A failing command ends the script under set -e; say which, so that a CI log is never empty.
trap 'echo "make-fixture-large.sh: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)" >&2' ERR
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${1:?usage: make-fixture-large.sh DIR [LIST]}
LIST=$(realpath "${2:-$HERE/fixture-large/packages.txt}")
[ -s "$LIST" ] || { echo "make-fixture-large.sh: package list $LIST is missing or empty" >&2; exit 1; }
mkdir -p "$DIR/debs"
DIR=$(cd "$DIR" && pwd)
stamp=$DIR/.fixture-stamp
want=$(cat "$LIST" "$0" | md5sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -d "$DIR/tree" ]; then
  echo "fixture-large: reusing $DIR/tree"
  exit 0
fi
for t in apt-get dpkg-deb sha256sum; do
  command -v $t >/dev/null || { echo "make-fixture-large.sh: $t is missing (a Debian system is needed)" >&2; exit 1; }
done
rm -rf "$DIR/tree" "$DIR/tree.partial" "$stamp" "$DIR/manifest.txt"

# deb_of NAME VERSION: the cached .deb of that exact version, if any
deb_of() {
  local f
  for f in "$DIR/debs/$1"_*.deb; do
    [ -f "$f" ] || continue
    [ "$(dpkg-deb -f "$f" Package Version | cut -d' ' -f2 | paste -sd' ')" = "$1 $2" ] && { echo "$f"; return 0; }
  done
  return 1
}
# One apt-get call for every .deb not cached yet. A version apt does not know makes the script
# refresh the package lists once (unless LC_FIXTURE_APT_UPDATE=0) before it gives up.
want_debs=()
while read -r name version; do
  case $name in ''|'#'*) continue ;; esac
  deb_of "$name" "$version" >/dev/null || want_debs+=("$name=$version")
done < "$LIST"
# apt-get writes into the current directory; as root it warns that _apt cannot write there.
fetch() { (cd "$DIR/debs" && apt-get download -q "${want_debs[@]}" >/dev/null 2>&1); }
if [ ${#want_debs[@]} -gt 0 ] && ! fetch; then
  if [ "${LC_FIXTURE_APT_UPDATE:-1}" != 0 ]; then apt-get update -qq >/dev/null 2>&1 || true; fi
  if ! fetch; then
    for d in "${want_debs[@]}"; do
      apt-cache show "$d" >/dev/null 2>&1 || {
        echo "make-fixture-large.sh: apt does not know $d (gone from the archive? re-pin it in $LIST:" \
             "apt-cache show --no-all-versions ${d%%=*})" >&2; exit 1; }
    done
    echo "make-fixture-large.sh: apt-get download ${want_debs[*]} failed (network?)" >&2; exit 1
  fi
fi

# Unpack into a scratch directory, renamed into place only when complete.
mkdir -p "$DIR/tree.partial"
while read -r name version; do
  case $name in ''|'#'*) continue ;; esac
  dpkg-deb -x "$(deb_of "$name" "$version")" "$DIR/tree.partial"
done < "$LIST"
# Hardlinks, as a deduplicating package store (pnpm, `hardlink`, rdfind) leaves them: every regular
# non-empty file whose content and mode equal an earlier file's (C-locale path order) becomes a hardlink
# to that earlier file (about 2,100 linked files in 650 groups with the default list).
P=$DIR/tree.partial
(cd "$P" && find . -type f -printf '%P\0' | xargs -0 -r sha256sum | sed 's/  /\t/') > "$DIR/hashes.tmp"
(cd "$P" && find . -type f -size +0 -printf '%m\t%P\n' | LC_ALL=C sort -t$'\t' -k2 |
  awk -F'\t' -v H="$DIR/hashes.tmp" 'BEGIN { while ((getline l < H) > 0) { i = index(l, "\t"); h[substr(l, i + 1)] = substr(l, 1, i - 1) } }
    { k = h[$2] " " $1; if (k in first) printf "%s%c%s%c", first[k], 0, $2, 0; else first[k] = $2 }' |
  xargs -0 -r -n2 ln -f)

# The manifest: one line per entry (hash "-" for non-files), C-locale path order.
(cd "$P" &&
  find . -mindepth 1 -printf '%y %m %s %n %l\t%P\n' |
  awk -F'\t' -v H="$DIR/hashes.tmp" 'BEGIN { while ((getline l < H) > 0) { i = index(l, "\t"); h[substr(l, i + 1)] = substr(l, 1, i - 1) } }
    { print $1 " " (($2 in h) ? h[$2] : "-") "\t" $2 }' | LC_ALL=C sort -t$'\t' -k2) > "$DIR/manifest.txt"
rm -f "$DIR/hashes.tmp"
mv "$P" "$DIR/tree"
echo "$want" > "$stamp"
echo "fixture-large: bytes=$(du -sb "$DIR/tree" | cut -f1) files=$(find "$DIR/tree" -type f | wc -l)" \
  "symlinks=$(find "$DIR/tree" -type l | wc -l) hardlinked=$(find "$DIR/tree" -type f -links +1 | wc -l)" \
  "dirs=$(find "$DIR/tree" -type d | wc -l)"
