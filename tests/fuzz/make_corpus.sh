#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/fuzz/make_corpus.sh SEEDS_BINARY: regenerates the checked-in seed corpus under
# tests/fuzz/corpus/ (run after a format change; inputs found by fuzzing are added by hand).
#   SEEDS_BINARY: build dir's tests/fuzz/lc-make-fuzz-seeds (forged archives, indexes, tar streams)
# Tar seeds also come from GNU tar (gnu and posix formats) and bsdtar; URL seeds are written here.
set -euo pipefail
seeds=${1:?usage: make_corpus.sh path/to/lc-make-fuzz-seeds}
here=$(cd "$(dirname "$0")" && pwd)
corpus=$here/corpus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$seeds" "$corpus"

mkdir -p "$work/t/dir/sub" "$corpus/fuzz_tar_reader"
echo hello > "$work/t/dir/a.txt"
printf 'x%.0s' $(seq 300) > "$work/t/dir/sub/$(printf 'long%.0s' $(seq 40))"
ln -sf a.txt "$work/t/dir/link"
ln -f "$work/t/dir/a.txt" "$work/t/dir/hard"
(cd "$work/t" && tar --format=gnu -cf "$corpus/fuzz_tar_reader/gnu.tar" dir)
(cd "$work/t" && tar --posix -cf "$corpus/fuzz_tar_reader/posix.tar" dir)
(cd "$work/t" && bsdtar --format=ustar -cf "$corpus/fuzz_tar_reader/ustar.tar" dir 2>/dev/null || true)

u=$corpus/fuzz_store_url
mkdir -p "$u"
i=0
while IFS= read -r line; do
  i=$((i + 1))
  printf '%b' "$line" > "$u/seed_$i"
done <<'SEEDS'
s3://bucket/prefix/sub
s3://bucket
s3://Bad_Bucket/..
file:///var/cache/lazycache/store
file://relative
/abs/dir
rel/./dir/../x
http://127.0.0.1:9000/base/path
https://cdn.example.com/k.tar.zst?X-Amz-Signature=abcdef&X-Amz-Credential=AKID
http://[::1]:8080/x
https://host:99999/
ci/linux\nnode-modules-abc123
\nkey with spaces/and/slashes%2F
scope\n..
a/../b
SEEDS
echo "corpus regenerated in $corpus"
