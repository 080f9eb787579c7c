#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/fuzz/make_corpus.sh SEEDS_BINARY: regenerates the checked-in seed corpus under
# tests/fuzz/corpus/ (run after a format change; inputs found by fuzzing are added by hand).
#   SEEDS_BINARY: build dir's tests/fuzz/lc-make-fuzz-seeds (forged archives, indexes, tar streams)
# Tar seeds also come from GNU tar (gnu and posix formats) and bsdtar; URL, SigV4/AWS config and S3
# reply seeds are written here (one per line, printf '%b': \x00 separates a target's fields).
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
# One seed per line of stdin into $corpus/$1/seed_N.
seed_lines() {
  local dir=$corpus/$1 n=0 line
  mkdir -p "$dir"
  while IFS= read -r line; do
    n=$((n + 1))
    printf '%b' "$line" > "$dir/seed_$n"
  done
}

# fuzz_sigv4 (tests/fuzz/fuzz_sigv4.cpp): "sign" method key region akid secret token time expiry
# params..., or "config" credentials-file config-file profile NAME=value...; $S/$T = secret/token.
seed_lines fuzz_sigv4 <<'SEEDS'
sign\x00GET\x00ci/linux/node-modules-abc123.lcz\x00us-east-1\x00AKIDEXAMPLE\x00secret\x00\x001369353600\x003600\x00Range:bytes=0-9
sign\x00PUT\x00a b/c%2Fd/ü€/..//x?y#z&=\x00eu-west-1\x00AKID\x00s\x00token\x001704164645\x00600\x00partNumber=1\x00uploadId=abc/def+ghi\x00Content-Type:  text/plain   \x00If-Match:"etag"
sign\x00GET\x00\x00us-east-1\x00AKID\x00x\x00\x000\x00\x00list-type=2\x00prefix=ci/\x00continuation-token=1/2+3=\x00max-keys=1000\x00delimiter=/\x00=\x00novalue
sign
sign\x00HEAD\x00k\x00r\x00a\x00b\x00c\x0018446744073709551615\x00999999999\x00X-Amz-Signature=forged\x00HOST:Other\x00host:dup
config\x00[default]\naws_access_key_id = AKID\naws_secret_access_key = $S\naws_session_token=$T\n\x00\x00
config\x00\x00[profile ci]\nregion = eu-central-1\nendpoint_url = http://127.0.0.1:9000\naws_access_key_id=AK\naws_secret_access_key=$S\n\x00ci
config\x00\x00\x00\x00AWS_ACCESS_KEY_ID=AKENV\x00AWS_SECRET_ACCESS_KEY=$S\x00AWS_SESSION_TOKEN=$T\x00AWS_REGION=ap-south-1\x00AWS_ENDPOINT_URL=https://r2.example.com
config\x00[default]\naws_secret_access_key=$S\n; comment\n# c\n[default\n\x00[default]\naws_session_token = $T\r\n\x00\x00AWS_DEFAULT_REGION=us-west-2\x00AWS_ACCESS_KEY_ID=only-the-id
config\x00 [ default ] \r\n\taws_access_key_id\t=\tAK ID \r\naws_secret_access_key=  $S  \r\n=\n[]\n\x00[profile default]\nregion=\n\x00\x00AWS_ENDPOINT_URL_S3=http://x\x00AWS_ENDPOINT_URL=http://y
config\x00[ci]\naws_access_key_id=A\naws_secret_access_key=$S$T\n\x00[profile ci]\naws_access_key_id=B\n\x00ci\x00AWS_PROFILE=other
SEEDS

# fuzz_s3_response (tests/fuzz/fuzz_s3_response.cpp): status content-range etag content-length
# last-modified if-match offset length unix-time, then the body.
seed_lines fuzz_s3_response <<'SEEDS'
206\x00bytes 0-9/10\x00"e1"\x0010\x00Tue, 15 Nov 1994 08:12:31 GMT\x00"e1"\x000\x0010\x00784887151\x000123456789
206\x00bytes 5-9/10\x00\x005\x00\x00\x005\x0010\x00\x0056789
200\x00\x00"abc"\x004\x002024-01-02T03:04:05.000Z\x00\x000\x004\x001704164645\x00abcd
416\x00bytes */10\x00\x00\x00\x00\x0010\x005\x00\x00
403\x00\x00\x00\x00\x00\x00\x00\x00\x00<?xml version="1.0"?><Error><Code>ExpiredToken</Code><Message>The token expired &amp; &lt;x&gt; &#65;&#x42;&#x20AC;&#0;&bogus;&</Message></Error>
400\x00\x00\x00\x00\x00\x00\x00\x00\x00<Error><Code>RequestTimeout</Code></Error>
503\x00\x00\x00\x00\x00\x00\x00\x00\x00<Error><Code>SlowDown</Code><Message>Reduce your request rate</Message></Error>
404\x00\x00\x00\x00\x00\x00\x00\x00\x00<Error><Code>NoSuchKey</Code></Error>
412\x00\x00\x00\x00\x00\x00\x00\x00\x00<Error><Code>PreconditionFailed</Code></Error>
501\x00\x00\x00\x00\x00\x00\x00\x00\x00<Error><Code>NotImplemented</Code></Error>
206\x00bytes 0-99/100\x00\x00\x00\x00\x0050\x0010\x00\x000123456789
206\x00bytes 0-3/4\x00"new"\x00\x00\x00"old"\x000\x004\x00\x00abcd
200\x00\x00\x00\x00\x00\x00\x00\x00\x00<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>a&amp;b</Key><Size>12</Size><ETag>&quot;x&quot;</ETag><LastModified>2024-01-02T03:04:05.000Z</LastModified></Contents><NextContinuationToken>t</NextContinuationToken></ListBucketResult>
206\x00bytes 18446744073709551615-18446744073709551615/18446744073709551615\x00\x00\x00\x00\x0018446744073709551615\x001\x00\x00x
206\x00bytes 0-3/4\x00\x00\x00\x00\x000\x009\x00\x00abcd
SEEDS
echo "corpus regenerated in $corpus"
