# SPDX-License-Identifier: MIT
# Sourced by the CLI tests that run against a local directory store or an S3 test server:
#   store_test_setup LAZYCACHE local|s3 ENV_FILE NAME
# makes the private work dir $W (run dir and chunk cache inside it; an EXIT trap unmounts what is
# mounted under it and removes it), $RUN (unique per run), exports LAZYCACHE_STORE (a directory
# in $W, or s3://lazycache/NAME-$RUN with the server's credentials from ENV_FILE, as
# tests/servers/*.sh writes it) and sets $E (the --endpoint option, or nothing). Defines fail(),
# lc CMD ARGS... (lazycache CMD with $E), run CODE CMD... (output in $W/out, $W/err; fails
# unless the exit code is CODE).
store_test_setup() {
  LC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1"); KIND=$2; ENVF=${3:-}
  W=$(mktemp -d "/tmp/lc-$4.XXXXXX")
  trap store_test_cleanup EXIT
  export LAZYCACHE_RUN_DIR=$W/run LAZYCACHE_CACHE_DIR=$W/chunks LAZYCACHE_CONFIG=''
  unset LAZYCACHE_STORE_MAX_SIZE
  RUN=run$$-$(date +%s%N)
  if [ "$KIND" = s3 ]; then
    [ -f "$ENVF" ] || fail "no env file $ENVF (start the server with tests/servers/*.sh)"
    set -a; . "$ENVF"; set +a
    export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY AWS_REGION=$S3_REGION
    export LAZYCACHE_STORE=s3://lazycache/$4-$RUN
    E=(--endpoint "$S3_ENDPOINT")
  else
    export LAZYCACHE_STORE=$W/store
    E=()
  fi
}
store_test_cleanup() {
  for m in $(awk -v w="$W" '$2 ~ "^"w {print $2}' /proc/mounts); do "$LC" unmount --lazy "$m" >/dev/null 2>&1 || umount -l "$m" || true; done
  rm -rf "$W"
}
fail() { echo "FAIL: $*" >&2; exit 1; }
lc() { "$LC" "$1" "${E[@]}" "${@:2}"; }
run() {
  local want=$1; shift
  set +e; "$@" >"$W/out" 2>"$W/err"; local got=$?; set -e
  [ "$got" = "$want" ] || { cat "$W/out" "$W/err" >&2; fail "'$*' exited $got, expected $want"; }
}
