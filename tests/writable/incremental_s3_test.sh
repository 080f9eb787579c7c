#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Incremental `unmount --save` to an S3 server (Swift s3api or s3rver, from the ctest fixtures):
# a 23 MiB entry mounted, one file changed, unmount --save: the unchanged runs are copied by the
# server (UploadPartCopy), well under a MiB goes up from this machine, and the new entry mounts
# with exactly the changed content and verifies. Skipped (exit 0) when FUSE cannot be used.
# Usage: incremental_s3_test.sh LAZYCACHE ENV_FILE
set -euo pipefail
. "$(dirname "$0")/cli_test_lib.sh"
cli_test_setup "$1" lc-incr-s3
ENVF=$2
[ -f "$ENVF" ] || fail "no env file $ENVF (start the server with tests/servers/*.sh)"
set -a; . "$ENVF"; set +a
export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY AWS_REGION=$S3_REGION
unset LAZYCACHE_STORE
S=(--store "s3://lazycache/incr/run$$-$(date +%s%N)" --endpoint "$S3_ENDPOINT")

mkdir -p "$P"
python3 - "$P" <<'PY'
import os, random, sys
rng = random.Random(3)
for p in range(40):
    d = os.path.join(sys.argv[1], 'pkg-%02d' % p); os.makedirs(d)
    for f in range(60):
        with open(os.path.join(d, 'f%02d.bin' % f), 'wb') as out: out.write(rng.randbytes(rng.randint(4000, 16000)))
PY
"$LC" save "${S[@]}" --key v1 --part-size 5M "$P" > "$W/out" || fail "save: $(cat "$W/out")"
cp -a "$P" "$W/twin"
rm -rf "$P"; mkdir -p "$P"
"$LC" mount "${S[@]}" --key v2 --restore-keys v1 "$P" > /dev/null
echo changed >> "$P/pkg-17/f03.bin"
echo changed >> "$W/twin/pkg-17/f03.bin"
"$LC" unmount --save "$P" > "$W/out" 2>&1 || fail "unmount --save: $(cat "$W/out")"
cat "$W/out"
line=$(grep "saved .* as key v2" "$W/out") || fail "no save line: $(cat "$W/out")"
[[ $line =~ base\ frames:\ ([0-9]+)\ copied\ by\ the\ store ]] || fail "no store copies: $line"
[ "${BASH_REMATCH[1]}" -ge 5 ] || fail "too few frames copied by the server: $line"
# The size as common/byte_format.h prints it (B, KiB, MiB, GiB), in MiB.
[[ $line =~ uploaded\ ([0-9.]+)\ (B|KiB|MiB|GiB)\  ]] || fail "no upload figure: $line"
uploaded_mib=$(awk -v v="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[2]}" \
  'BEGIN { printf "%.4f", v * (u == "B" ? 1 / 1048576 : u == "KiB" ? 1 / 1024 : u == "MiB" ? 1 : 1024) }')
awk -v u="$uploaded_mib" 'BEGIN { exit !(u < 1.0) }' || fail "uploaded $uploaded_mib MiB for one changed file: $line"
"$LC" mount "${S[@]}" --key v2 --read-only "$P" > /dev/null
diff -r "$W/twin" "$P" > /dev/null || fail "the new entry differs from the changed tree"
"$LC" unmount "$P" > /dev/null
"$LC" verify "${S[@]}" --key v2 > /dev/null || fail "verify v2"
echo PASS
