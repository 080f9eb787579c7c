#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make-fixture-mixed.sh DIR [SCALE] -- a mixed binary + text tree in DIR (about 300 MiB at
# SCALE 1): the few-large-files case of a CI cache (build outputs, toolchains).
#   big/largest-lib.so   the largest shared library in /usr/lib/x86_64-linux-gnu (compressible ELF;
#                        its first 256 MiB x SCALE)
#   big/noise.bin        64 MiB of AES-128-CTR keystream under a fixed key: incompressible, and
#                        the same bytes on every machine
#   lib/                 .so files of /usr/lib/x86_64-linux-gnu, ~75 MiB
#   doc/                 /usr/share/doc, ~35 MiB (changelogs, copyright files, .gz)
#   include/             /usr/include, ~25 MiB of small headers
# Each part takes files in C-locale path order until its byte budget is spent, so machines with
# the same Debian packages build the same tree. SCALE (default 1) multiplies every budget
# (the --quick bench uses 0.25). Rebuilds only when DIR lacks the stamp for this SCALE.
set -euo pipefail
# A failing command ends the script under set -e; say which, so that a CI log is never empty.
trap 'echo "make-fixture-mixed.sh: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)" >&2' ERR
DIR=${1:?usage: make-fixture-mixed.sh DIR [SCALE]}
SCALE=${2:-1}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
stamp=$DIR/.fixture-stamp
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "scale=$SCALE" ]; then
  echo "fixture-mixed: reusing $DIR"
  exit 0
fi
find "$DIR" -mindepth 1 -delete
MiB=1048576
budget() { awk -v m="$1" -v s="$SCALE" 'BEGIN { printf "%d", m * s * 1048576 }'; }

# copy_budget SRC DEST BYTES FIND-ARGS...: the first files of SRC (path order) that fit BYTES
copy_budget() {
  local src=$1 dest=$2 bytes=$3
  shift 3
  mkdir -p "$dest"
  (cd "$src" && find . "$@" -type f -readable -printf '%P\t%s\n' | LC_ALL=C sort |
     awk -F'\t' -v max="$bytes" '!full { used += $2; if (used > max) full = 1; else printf "%s%c", $1, 0 }' |
     tar --null --files-from=- -cf -) | tar -xf - -C "$dest"
}

mkdir -p "$DIR/big"
# sed reads to the end: `head -1` would exit before sort's last write, and sort's SIGPIPE under
# pipefail ended this script at random (exit 141, seen in CI).
largest=$(find /usr/lib/x86_64-linux-gnu -maxdepth 1 -type f -name '*.so*' -printf '%s\t%p\n' |
  sort -rn | sed -n 1p | cut -f2)
# At most 256 MiB x SCALE of it: the whole library at SCALE 1, a slice of it in small trees.
head -c "$(budget 256)" "$largest" > "$DIR/big/largest-lib.so"
openssl enc -aes-128-ctr -nosalt -K 6c617a7963616368652d62656e636821 -iv 0 -in /dev/zero 2>/dev/null |
  head -c "$(budget 64)" > "$DIR/big/noise.bin" || true
copy_budget /usr/lib/x86_64-linux-gnu "$DIR/lib" "$(budget 75)" -maxdepth 1 -name '*.so*' \
  ! -samefile "$largest"
copy_budget /usr/share/doc "$DIR/doc" "$(budget 35)"
copy_budget /usr/include "$DIR/include" "$(budget 25)"
echo "scale=$SCALE" > "$stamp"
echo "fixture-mixed: bytes=$(du -sb --exclude=.fixture-stamp "$DIR" | cut -f1)" \
  "files=$(find "$DIR" -type f ! -name .fixture-stamp | wc -l) dirs=$(find "$DIR" -type d | wc -l)"
