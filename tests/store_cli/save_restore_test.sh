#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/store_cli/save_restore_test.sh LAZYCACHE local|s3 [ENV_FILE]
# save then restore --extract through the CLI, against a local directory store or an S3 server
# (ENV_FILE from tests/servers/*.sh), and checks:
#  - the restored tree is identical to the saved one (content, modes, symlinks, empty dirs);
#  - a second save to the same key is skipped (immutable entries), exit 0;
#  - restore-keys: exact key > newest entry of the first matching prefix > later prefixes;
#  - outputs (cache-hit, cache-primary-key, cache-matched-key) go to $GITHUB_OUTPUT;
#  - a miss exits 0, or 3 with --fail-on-cache-miss;
#  - ls / cat / verify --key read the entry in the store;
#  - the archive decodes with stock tools: zstd -d | tar -x gives the same tree;
#  - S3: rclone downloads the entry (then zstd -d | tar -x), and an entry uploaded with curl
#    restores with lazycache; --virtual-hosted save/cat where the server has it (Swift); with
#    AWS_SESSION_TOKEN set, save and cat work and no credential
#    appears in any output (a rejected request included).
set -euo pipefail
LC=$1; KIND=$2; ENVF=${3:-}
W=$(mktemp -d /tmp/lc-store-cli.XXXXXX)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
RUN=run$$-$(date +%s%N)

if [ "$KIND" = s3 ]; then
  [ -f "$ENVF" ] || fail "no env file $ENVF (start the server with tests/servers/*.sh)"
  set -a; . "$ENVF"; set +a
  export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY AWS_REGION=$S3_REGION
  STORE=(--store "s3://lazycache/cli/$RUN" --endpoint "$S3_ENDPOINT")
  # Transfer options: only the commands that move whole archives take them (save, restore, mount).
  XFER=(--part-size 5M --concurrency 3)
else
  STORE=(--store "$W/store")
  XFER=()
fi
lc() { "$LC" "$@"; }

# A tree with several MiB (multipart on S3 with 5 MiB parts), small files, a symlink, an empty
# dir and odd modes, under an absolute path (restore puts it back there).
T=$W/work/tree
mkdir -p "$T/sub/deeper" "$T/empty"
head -c 13000000 /dev/urandom > "$T/big.bin"
for i in $(seq 1 50); do echo "file $i $RUN" > "$T/sub/f$i.txt"; done
printf 'x' > "$T/sub/deeper/one"
chmod 600 "$T/sub/f1.txt"; chmod 755 "$T/sub/f2.txt"
ln -s ../big.bin "$T/sub/link"
cp -a "$T" "$W/expected"

snapshot() {  # content + type + mode of every entry, relative
  (cd "$1" && find . -printf '%y %m %p %l\n' | sort && find . -type f -print0 | sort -z | xargs -0 sha256sum)
}

lc save "${STORE[@]}" "${XFER[@]}" --key "deps-$RUN-a" "$T" > "$W/save.out" || fail "save"
grep -q "saved key deps-$RUN-a" "$W/save.out" || fail "save printed: $(cat "$W/save.out")"
out=$(lc save "${STORE[@]}" "${XFER[@]}" --key "deps-$RUN-a" "$T") || fail "second save exited non-zero"
[[ $out == *"already exists"* ]] || fail "second save not skipped: $out"

# ls / cat / verify read a store entry without downloading it all
[ "$(lc cat "${STORE[@]}" --key "deps-$RUN-a" "${T#/}/sub/f3.txt")" = "file 3 $RUN" ] || fail "cat --key"
lc ls "${STORE[@]}" --key "deps-$RUN-a" | grep -q "sub/deeper/one" || fail "ls --key"
lc verify "${STORE[@]}" --key "deps-$RUN-a" >/dev/null || fail "verify --key"

rm -rf "$T"
GITHUB_OUTPUT=$W/gh-output lc restore --extract "${STORE[@]}" "${XFER[@]}" --key "deps-$RUN-a" "$T" > "$W/restore.out" || fail "restore"
[ "$(snapshot "$T")" = "$(snapshot "$W/expected")" ] || { diff <(snapshot "$T") <(snapshot "$W/expected") | head; fail "restored tree differs"; }
grep -qx "cache-hit=true" "$W/gh-output" || fail "GITHUB_OUTPUT: $(cat "$W/gh-output")"
grep -qx "cache-matched-key=deps-$RUN-a" "$W/gh-output" || fail "matched key missing"

# restore-keys: two more entries under deps-$RUN-, the newest must win for that prefix.
echo second > "$T/marker"; lc save "${STORE[@]}" "${XFER[@]}" --key "deps-$RUN-b" "$T" >/dev/null || fail "save b"
sleep 1.1  # Last-Modified has one-second resolution
echo third > "$T/marker"; lc save "${STORE[@]}" "${XFER[@]}" --key "deps-$RUN-c" "$T" >/dev/null || fail "save c"
# The object an entry is stored as (its name carries the paths' version: remote/cache_keys.h).
object_of() { lc list "${STORE[@]}" --json --prefix "$1" 2>/dev/null | sed -n "s/.*\"key\":\"$1\",\"object\":\"\([^\"]*\)\".*/\1/p"; }
if [ "$KIND" = local ]; then  # make ages unambiguous on the local store
  touch -d "3 hours ago" "$W/store/$(object_of "deps-$RUN-a")"; touch -d "2 hours ago" "$W/store/$(object_of "deps-$RUN-b")"
  touch -d "1 hour ago" "$W/store/$(object_of "deps-$RUN-c")"
fi
out=$(lc lookup "${STORE[@]}" --key "deps-$RUN-zzz" --restore-keys "nomatch-" --restore-keys "deps-$RUN-" 2>/dev/null)
[[ $out == *"cache-hit=false"* && $out == *"cache-matched-key=deps-$RUN-c"* ]] || fail "newest under prefix: $out"
out=$(lc lookup "${STORE[@]}" --key "deps-$RUN-b" --restore-keys "deps-$RUN-" 2>/dev/null)
[[ $out == *"cache-hit=true"* && $out == *"cache-matched-key=deps-$RUN-b"* ]] || fail "exact wins: $out"
out=$(lc lookup "${STORE[@]}" --key "x-$RUN" --restore-keys "deps-$RUN-a" --restore-keys "deps-$RUN-" 2>/dev/null)
[[ $out == *"cache-matched-key=deps-$RUN-a"* ]] || fail "first matching prefix wins: $out"
# newline-separated restore-keys, as actions/cache passes them
out=$(lc lookup "${STORE[@]}" --key "x-$RUN" --restore-keys "$(printf 'nomatch-\ndeps-%s-\n' "$RUN")" 2>/dev/null)
[[ $out == *"cache-matched-key=deps-$RUN-c"* ]] || fail "newline list: $out"
rm -rf "$T"
lc restore --extract "${STORE[@]}" "${XFER[@]}" --key "x-$RUN" --restore-keys "deps-$RUN-" "$T" >/dev/null || fail "restore via prefix"
[ "$(cat "$T/marker")" = third ] || fail "restore via prefix got the wrong entry"

# scope: the same key in another scope is another entry
out=$(lc lookup "${STORE[@]}" --scope "other/branch" --key "deps-$RUN-a" 2>/dev/null)
[[ $out == *"cache-hit=false"* ]] || fail "scope leak: $out"

# misses
lc restore --extract "${STORE[@]}" "${XFER[@]}" --key "none-$RUN" "$T" >/dev/null || fail "a miss must exit 0"
set +e; lc restore --extract "${STORE[@]}" "${XFER[@]}" --key "none-$RUN" --fail-on-cache-miss "$T" >/dev/null 2>&1; rc=$?; set -e
[ $rc = 3 ] || fail "--fail-on-cache-miss exit $rc"

# stock tools: the entry decodes with zstd -d | tar -x
if [ "$KIND" = local ]; then
  mkdir -p "$W/stock"
  zstd -dc "$W/store/$(object_of "deps-$RUN-a")" | tar -x -C "$W/stock"
  [ "$(snapshot "$W/stock/${W#/}/work/tree")" = "$(snapshot "$W/expected")" ] || fail "zstd -d | tar -x differs"
fi
# Interop on S3: rclone (provider Other) downloads an entry lazycache saved, and stock tools
# unpack it; an archive uploaded by curl is restored by lazycache.
if [ "$KIND" = s3 ]; then
  if ! command -v rclone >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rclone >/dev/null 2>&1 ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rclone >/dev/null; }
  fi
  export RCLONE_CONFIG_LC_TYPE=s3 RCLONE_CONFIG_LC_PROVIDER=Other RCLONE_CONFIG_LC_ENDPOINT=$S3_ENDPOINT \
    RCLONE_CONFIG_LC_ACCESS_KEY_ID=$S3_ACCESS_KEY RCLONE_CONFIG_LC_SECRET_ACCESS_KEY=$S3_SECRET_KEY \
    RCLONE_CONFIG_LC_REGION=$S3_REGION RCLONE_CONFIG_LC_FORCE_PATH_STYLE=true
  unset AWS_CA_BUNDLE
  rclone copyto "lc:lazycache/cli/$RUN/$(object_of "deps-$RUN-a")" "$W/rclone.tar.zst" 2>"$W/rclone.log" ||
    { cat "$W/rclone.log"; fail "rclone download"; }
  mkdir -p "$W/stock"
  zstd -dc "$W/rclone.tar.zst" | tar -x -C "$W/stock"
  [ "$(snapshot "$W/stock/${W#/}/work/tree")" = "$(snapshot "$W/expected")" ] || fail "rclone + zstd -d | tar -x differs"
  # curl --aws-sigv4 splits -u at the first ':', and Swift's key has one: use a netrc file.
  host=${S3_ENDPOINT#*://}; host=${host%%:*}
  printf 'machine %s login %s password %s\n' "$host" "$S3_ACCESS_KEY" "$S3_SECRET_KEY" > "$W/netrc"
  curl -sf -X PUT --aws-sigv4 "aws:amz:$S3_REGION:s3" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
    --netrc-file "$W/netrc" -T "$W/rclone.tar.zst" "$S3_ENDPOINT/lazycache/cli/$RUN/uploaded-$RUN.tar.zst" ||
    fail "curl upload"
  rm -rf "$T"
  # Uploaded under a name without a version (as an older lazycache names entries): another
  # version than T's, so taken with --any-paths.
  lc restore --extract "${STORE[@]}" "${XFER[@]}" --any-paths --key "uploaded-$RUN" "$T" >/dev/null || fail "restore of a curl-uploaded entry"
  [ -e "$T/big.bin" ] || fail "the curl-uploaded entry was not restored"
  [ "$(snapshot "$T")" = "$(snapshot "$W/expected")" ] || fail "curl-uploaded entry restored differently"
fi
# Virtual-hosted style through the CLI where the server has it (Swift: S3_VHOST_ENDPOINT).
if [ "$KIND" = s3 ] && [ -n "${S3_VHOST_ENDPOINT:-}" ]; then
  VH=(--store "s3://lazycache/cli/$RUN" --endpoint "$S3_VHOST_ENDPOINT" --virtual-hosted)
  lc save "${VH[@]}" --key "vhost-$RUN" "$W/expected" > "$W/vhost.out" 2>&1 || { cat "$W/vhost.out"; fail "save, virtual-hosted"; }
  lc ls "${STORE[@]}" --key "vhost-$RUN" | grep -q "sub/deeper/one" || fail "an entry saved virtual-hosted is not seen path-style"
  [ "$(lc cat "${VH[@]}" --key "deps-$RUN-a" "${T#/}/sub/f3.txt")" = "file 3 $RUN" ] || fail "cat --key, virtual-hosted"
fi

# Temporary credentials from the environment: the token is signed and sent (both servers verify
# the signature over it), and neither it nor the secret shows in any output, errors included.
if [ "$KIND" = s3 ]; then
  TOKEN="IQoJb3JpZ2luX2VjEToken$RUN"
  mkdir -p "$W/small" && echo tokened > "$W/small/f"
  AWS_SESSION_TOKEN=$TOKEN lc save "${STORE[@]}" "${XFER[@]}" --key "token-$RUN" "$W/small" > "$W/token.out" 2>&1 || { cat "$W/token.out"; fail "save with a session token"; }
  AWS_SESSION_TOKEN=$TOKEN lc cat "${STORE[@]}" --key "token-$RUN" "${W#/}/small/f" >> "$W/token.out" 2>&1 || fail "cat with a session token"
  grep -qx tokened "$W/token.out" || fail "cat with a session token: $(cat "$W/token.out")"
  set +e
  AWS_SESSION_TOKEN=$TOKEN AWS_SECRET_ACCESS_KEY=wrong-secret-$RUN lc cat "${STORE[@]}" --key "token-$RUN" "${W#/}/small/f" >> "$W/token.out" 2>&1
  rc=$?; set -e
  [ $rc != 0 ] || fail "a wrong secret was accepted"
  if grep -qF -e "$TOKEN" -e "wrong-secret-$RUN" -e "$S3_SECRET_KEY" "$W/token.out"; then fail "a credential appears in the output"; fi
fi
echo "save/restore ($KIND): ok"
