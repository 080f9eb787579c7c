#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/servers/s3rver5.sh start DIR PORT | stop DIR
#
# @20minutes/s3rver@5 (npm) on 127.0.0.1:PORT: the second S3 dialect of the test suite. It
# verifies SigV4 signatures but also serves anonymous requests, ignores region and payload
# hashes, answers suffix ranges (bytes=-N) with the *first* bytes and ignores If-None-Match.
# Not used virtual-hosted: its vhost mode verifies SigV4 over "/BUCKET/KEY" instead of the path
# sent ("/KEY"), so every signed object request fails (lib/middleware/authentication.js).
#   start: installs node/npm (Debian) and the package (npm, into S3RVER5_HOME, default
#          DIR/npm) when missing, starts it in the background (PID in DIR/s3rver5.pid, output
#          in DIR/s3rver5.log), waits until it answers, writes DIR/env (mode 600) with
#          S3_ENDPOINT, S3_REGION, S3_ACCESS_KEY, S3_SECRET_KEY and prints only the endpoint.
#   stop:  stops that PID only.
# Env: S3RVER5_BUCKETS (space-separated buckets created at start, default "lazycache").
set -euo pipefail
usage() { echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1; DIR=$2
running() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1; [[ $st != Z* ]]; }

if [ "$cmd" = stop ]; then
  if [ -f "$DIR/s3rver5.pid" ]; then
    pid=$(cat "$DIR/s3rver5.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do running "$pid" || break; sleep 0.1; done
    running "$pid" && kill -9 "$pid" 2>/dev/null
    rm -f "$DIR/s3rver5.pid"
  fi
  echo "s3rver5: stopped ($DIR)"
  exit 0
fi
[ "$cmd" = start ] && [ $# -eq 3 ] || usage
PORT=$3

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "s3rver5: installing nodejs npm" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null; }
fi
mkdir -p "$DIR/store"
DIR=$(cd "$DIR" && pwd)
NPM_HOME=${S3RVER5_HOME:-$DIR/npm}
if [ ! -f "$NPM_HOME/node_modules/@20minutes/s3rver/package.json" ]; then
  mkdir -p "$NPM_HOME"
  (cd "$NPM_HOME" && npm install --no-audit --no-fund --loglevel=error @20minutes/s3rver@5 >&2)
fi
if [ -f "$DIR/s3rver5.pid" ] && running "$(cat "$DIR/s3rver5.pid")"; then
  echo "s3rver5: already running in $DIR" >&2; exit 1
fi
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then echo "s3rver5: port $PORT is busy" >&2; exit 1; fi

# The package ships no CLI entry point, so it is started from a one-line script. The legacy
# OpenSSL provider is needed because its ListObjectsV2 continuation tokens use DES (else 500).
cd "$NPM_HOME"
LC_PORT=$PORT LC_DIR=$DIR/store LC_BUCKETS=${S3RVER5_BUCKETS:-lazycache} \
  nohup node --openssl-legacy-provider -e '
    const S3rver = require("@20minutes/s3rver");
    const env = process.env;
    const buckets = env.LC_BUCKETS.split(" ").filter(Boolean).map(name => ({ name, configs: [] }));
    new S3rver({ address: "127.0.0.1", port: Number(env.LC_PORT), directory: env.LC_DIR,
                 silent: true, configureBuckets: buckets })
      .run().then(() => console.log("s3rver5 listening"), e => { console.error(e); process.exit(1); });
  ' > "$DIR/s3rver5.log" 2>&1 &
echo $! > "$DIR/s3rver5.pid"

ready=0
for _ in $(seq 150); do
  if curl -s -o /dev/null "http://127.0.0.1:$PORT/"; then ready=1; break; fi
  sleep 0.1
done
if [ $ready != 1 ]; then
  echo "s3rver5: did not start; log:" >&2
  cat "$DIR/s3rver5.log" >&2 || true
  "$0" stop "$DIR" >/dev/null
  exit 1
fi
umask 077
printf 'S3_ENDPOINT=http://127.0.0.1:%s\nS3_REGION=us-east-1\nS3_ACCESS_KEY=S3RVER\nS3_SECRET_KEY=S3RVER\n' "$PORT" > "$DIR/env"
echo "s3rver5: ready at http://127.0.0.1:$PORT (credentials in $DIR/env)"
