#!/usr/bin/env bash
# Entries are stored as application/zstd on every upload path (issue 18 item 13): a small save
# (one PUT) and a multipart one (CreateMultipartUpload: its POST's application/xml must not leak
# into the object's type). Reads the type s3rver recorded for each object from its data directory.
# Usage: content_type_test.sh LAZYCACHE S3RVER_ENV_FILE S3RVER_STORE_DIR
set -euo pipefail
LC=$1 ENVF=$2 DATA=$3
W=$(mktemp -d /tmp/lc-ctype.XXXXXX)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck disable=SC1090
source "$ENVF"
export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY AWS_REGION=$S3_REGION LAZYCACHE_CONFIG=''
K=ctype-$(date +%s%N)-$$   # entries are immutable and the server's data outlives a run
mkdir -p "$W/small" "$W/big"
echo hi > "$W/small/a"
head -c 12000000 /dev/urandom > "$W/big/b"   # incompressible: 12 MB = 3 parts of 5 MiB
S=(--store s3://lazycache/ctype --endpoint "$S3_ENDPOINT")
"$LC" save "${S[@]}" --key "$K-single" "$W/small" > /dev/null
"$LC" save "${S[@]}" --part-size 5M --key "$K-multi" "$W/big" > "$W/out"
grep -Eq '[4-9] requests' "$W/out" || fail "the big save was not multipart: $(cat "$W/out")"
for k in single multi; do
  # The object's name carries the paths' version: K!VERSION.tar.zst (remote/cache_keys.h).
  meta=$(find "$DATA/lazycache/ctype" -name "$K-$k!*.tar.zst._S3rver_metadata.json" | sed -n 1p)
  [ -f "$meta" ] || fail "no s3rver metadata at $meta"
  grep -q '"content-type": *"application/zstd"' "$meta" || fail "$k entry stored as: $(cat "$meta")"
done
echo ok
