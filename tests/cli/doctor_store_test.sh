#!/usr/bin/env bash
# `doctor` checks the store and says what is wrong (issue 18 item 2): a usable local store, a
# mistyped URL, no S3 credentials, a closed port, a bucket that does not exist, refused
# credentials; text and --json; exit 1 when the store cannot be used (0 for a usable store
# only where FUSE is usable too); no secret in the output.
# Usage: doctor_store_test.sh path/to/lazycache
set -euo pipefail
LC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d /tmp/lc-doctor.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
for mode in nobucket denied; do
  python3 "$HERE/stuck_store.py" "$mode" "$W/port.$mode" </dev/null >/dev/null 2>&1 &
  PIDS+=($!)
done
for mode in nobucket denied; do
  for _ in $(seq 200); do [ -s "$W/port.$mode" ] && break; sleep 0.05; done
  [ -s "$W/port.$mode" ] || fail "stuck_store.py $mode did not start"
done
export LAZYCACHE_CONFIG='' LAZYCACHE_STORE='' HOME=$W/home AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3
mkdir -p "$W/home" "$W/store"

doctor() {  # doctor WANT_RC ARGS...: text to $W/out, --json to $W/json
  local want=$1; shift
  set +e; "$LC" doctor --no-trial-mount "$@" > "$W/out" 2>&1; local rc=$?; "$LC" doctor --no-trial-mount --json "$@" > "$W/json" 2>/dev/null; set -e
  [ "$rc" = "$want" ] || { cat "$W/out" >&2; fail "doctor $* exited $rc, expected $want"; }
}
expect() {  # expect REGEX: in the text output and the JSON's store_problem
  grep -Eq "$1" "$W/out" || { cat "$W/out" >&2; fail "doctor text lacks /$1/"; }
}

fuse_ok=0; "$LC" doctor --no-trial-mount --no-store-check >/dev/null 2>&1 || fuse_ok=1
doctor $fuse_ok --store "file://$W/store"
expect "store check: file://$W/store: OK"
grep -q '"store_ok":true' "$W/json" || fail "json: $(cat "$W/json")"

doctor 1 --store 's3:/bucket/x'
expect "NOT usable: the store URL or an option is invalid"
doctor 1 --store s3://some-bucket/p --endpoint http://127.0.0.1:9
expect "NOT usable: no S3 credentials found"
export AWS_ACCESS_KEY_ID=AKIDTEST AWS_SECRET_ACCESS_KEY=SeCrEtVaLuE42 AWS_REGION=us-east-1
doctor 1 --store s3://some-bucket/p --endpoint http://127.0.0.1:9
expect "NOT usable: the store is not reachable"
doctor 1 --store s3://some-bucket/p --endpoint "http://127.0.0.1:$(cat "$W/port.nobucket")"
expect "NOT usable: the bucket does not exist"
grep -q '"store_ok":false' "$W/json" && grep -q '"store_problem":"the bucket does not exist"' "$W/json" || fail "json: $(cat "$W/json")"
doctor 1 --store s3://some-bucket/p --endpoint "http://127.0.0.1:$(cat "$W/port.denied")"
expect "NOT usable: the secret key is wrong"
! grep -q "SeCrEtVaLuE42" "$W/out" "$W/json" || fail "the secret's value is printed"
doctor $fuse_ok --store "file://$W/store" --no-store-check
! grep -q "store check" "$W/out" || fail "--no-store-check checked"
echo ok
