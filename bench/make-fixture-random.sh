#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make-fixture-random.sh DIR MIB -- DIR/payload/random.bin: MIB MiB of incompressible bytes, the
# payload of the seed projects' transfer benchmarks (cloud-cache-action restores 512 MiB of random
# bytes). AES-128-CTR keystream under a fixed key, so the same bytes on every machine.
# Rebuilt only when DIR lacks the stamp for this size.
set -euo pipefail
# A failing command ends the script under set -e; say which, so that a CI log is never empty.
trap 'echo "make-fixture-random.sh: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)" >&2' ERR
DIR=${1:?usage: make-fixture-random.sh DIR MIB}
MIB=${2:?usage: make-fixture-random.sh DIR MIB}
mkdir -p "$DIR"
stamp=$DIR/.fixture-stamp
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "mib=$MIB" ]; then
  echo "fixture-random: reusing $DIR/payload"
  exit 0
fi
rm -rf "$DIR/payload" "$stamp"
mkdir -p "$DIR/payload"
openssl enc -aes-128-ctr -nosalt -K 6c617a7963616368652d72616e646f6d -iv 0 -in /dev/zero 2>/dev/null |
  head -c $((MIB * 1048576)) > "$DIR/payload/random.bin" || true
[ "$(stat -c %s "$DIR/payload/random.bin")" = $((MIB * 1048576)) ] ||
  { echo "make-fixture-random.sh: could not write $MIB MiB to $DIR/payload/random.bin" >&2; exit 1; }
echo "mib=$MIB" > "$stamp"
echo "fixture-random: $MIB MiB in $DIR/payload/random.bin"
