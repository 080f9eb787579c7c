#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/servers/swift-s3.sh start DIR PORT | stop DIR
#
# OpenStack Swift (Debian packages) with the s3api + tempauth middlewares on 127.0.0.1: the
# strict S3 server of the test suite (it verifies SigV4 signatures, payload hashes, region and
# clock skew). One replica, one device, everything under DIR:
#   DIR/etc   configs and rings (the rings pin the ports: a DIR is reused only with the same PORT)
#   DIR/node  object data (needs user xattrs: ext4/xfs yes)
#   DIR/run   PID files (stop kills only these)       DIR/log  startup output
# Ports: proxy PORT, account PORT+1, container PORT+2, object PORT+3, memcached PORT+4.
# On success writes DIR/env (mode 600) with S3_ENDPOINT, S3_VHOST_ENDPOINT (virtual-hosted style:
# BUCKET.s3.localhost:PORT), S3_REGION, S3_ACCESS_KEY, S3_SECRET_KEY and prints only the endpoint:
# credentials never go to logs.
# Env: SWIFT_BUCKETS (space-separated buckets created at start, default "lazycache"),
#      SWIFT_WORKERS (default 0: one process per server, no forking).
set -euo pipefail
usage() { echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1; DIR=$2

running() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1; [[ $st != Z* ]]; }

stop_all() {
  local f pid
  [ -d "$DIR/run" ] || return 0
  for f in "$DIR"/run/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  for f in "$DIR"/run/*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    for _ in $(seq 60); do running "$pid" || break; sleep 0.1; done
    running "$pid" && kill -9 "$pid" 2>/dev/null
    rm -f "$f"
  done
  return 0
}

case $cmd in
  stop) stop_all; echo "swift-s3: stopped ($DIR)"; exit 0 ;;
  start) [ $# -eq 3 ] || usage; PORT=$3 ;;
  *) usage ;;
esac

# Packages: only when missing (this image runs no Debian service scripts, so installing starts
# nothing of its own).
need=0
for b in swift-proxy-server swift-account-server swift-container-server swift-object-server memcached; do
  command -v "$b" >/dev/null || need=1
done
if [ $need = 1 ]; then
  pkgs="swift swift-proxy swift-account swift-container swift-object python3-swift memcached"
  export DEBIAN_FRONTEND=noninteractive
  echo "swift-s3: installing $pkgs" >&2
  apt-get install -y -qq --no-install-recommends $pkgs >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends $pkgs >/dev/null; }
fi
# Swift reads its hash settings from this fixed path; the package normally ships it.
if [ ! -f /etc/swift/swift.conf ]; then
  mkdir -p /etc/swift
  cat > /etc/swift/swift.conf <<'CONF'
[swift-hash]
swift_hash_path_suffix = lazycache-tests
[storage-policy:0]
name = Policy-0
default = yes
CONF
fi

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
ETC=$DIR/etc
mkdir -p "$ETC" "$DIR/node/d1" "$DIR/run" "$DIR/log"
for f in "$DIR"/run/*.pid; do
  [ -e "$f" ] && running "$(cat "$f")" && { echo "swift-s3: already running in $DIR" >&2; exit 1; }
done
if [ -f "$ETC/port" ] && [ "$(cat "$ETC/port")" != "$PORT" ]; then
  echo "swift-s3: $DIR was set up for port $(cat "$ETC/port"), not $PORT" >&2; exit 1
fi
for p in $PORT $((PORT + 1)) $((PORT + 2)) $((PORT + 3)) $((PORT + 4)); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "swift-s3: port $p is busy" >&2; exit 1; fi
done
USER_NAME=$(id -un)

server_conf() {  # server_conf PORT NAME: the [DEFAULT] section every server shares
  printf '[DEFAULT]\nbind_ip = 127.0.0.1\nbind_port = %s\nworkers = %s\nuser = %s\n' "$1" "${SWIFT_WORKERS:-0}" "$USER_NAME"
  printf 'swift_dir = %s\ndevices = %s\nmount_check = false\nlog_name = %s\n' "$ETC" "$DIR/node" "$2"
}

{
  server_conf "$PORT" proxy
  cat <<CONF
[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server
[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true
[filter:s3api]
use = egg:swift#s3api
location = us-east-1
# S3 allows 10,000 parts; Swift's default is 1000
max_upload_part_num = 10000
# Virtual-hosted style: Host BUCKET.s3.localhost names the bucket (curl resolves *.localhost to
# loopback itself, so no /etc/hosts entry is needed); 127.0.0.1 stays path-style.
storage_domain = s3.localhost
[filter:slo]
use = egg:swift#slo
max_manifest_segments = 10000
[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = testing .admin
[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:$((PORT + 4))
CONF
  for m in catch_errors gatekeeper healthcheck proxy-logging listing_formats copy dlo; do
    printf '[filter:%s]\nuse = egg:swift#%s\n' "$m" "${m//-/_}"
  done
} > "$ETC/proxy-server.conf"

n=1
for s in account container object; do
  {
    server_conf $((PORT + n)) "$s"
    printf '[pipeline:main]\npipeline = healthcheck %s-server\n' "$s"
    printf '[filter:healthcheck]\nuse = egg:swift#healthcheck\n[app:%s-server]\nuse = egg:swift#%s\n' "$s" "$s"
  } > "$ETC/$s-server.conf"
  n=$((n + 1))
done

# Rings: built once per DIR with Swift's own RingBuilder (one python run is much faster than the
# swift-ring-builder CLI).
if [ ! -f "$ETC/port" ]; then
  /usr/bin/python3 - "$ETC" "$PORT" <<'PY'
import sys
from swift.common.ring import RingBuilder
etc, port = sys.argv[1], int(sys.argv[2])
for offset, name in ((1, 'account'), (2, 'container'), (3, 'object')):
    rb = RingBuilder(6, 1, 0)
    rb.add_dev({'id': 0, 'region': 1, 'zone': 1, 'ip': '127.0.0.1', 'port': port + offset,
                'device': 'd1', 'weight': 1, 'meta': ''})
    rb.rebalance()
    rb.save('%s/%s.builder' % (etc, name))
    rb.get_ring().save('%s/%s.ring.gz' % (etc, name))
PY
  echo "$PORT" > "$ETC/port"
fi

# A private memcached: tempauth requires a cache, and tokens must not leak between instances.
memcached -l 127.0.0.1 -p $((PORT + 4)) -U 0 -m 64 -u "$USER_NAME" > "$DIR/log/memcached.log" 2>&1 &
echo $! > "$DIR/run/memcached.pid"
for s in account container object proxy; do
  "swift-$s-server" "$ETC/$s-server.conf" -v > "$DIR/log/$s.log" 2>&1 &
  echo $! > "$DIR/run/$s.pid"
done

# Ready when every server answers /healthcheck and a signed ListBuckets succeeds (~2 s).
ready=0
for _ in $(seq 400); do
  ok=1
  for p in $PORT $((PORT + 1)) $((PORT + 2)) $((PORT + 3)); do
    curl -fs -o /dev/null "http://127.0.0.1:$p/healthcheck" || { ok=0; break; }
  done
  if [ $ok = 1 ] && curl -fs -o /dev/null --aws-sigv4 aws:amz:us-east-1:s3 \
       -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' --netrc-file <(printf 'machine 127.0.0.1 login test:tester password testing\n') \
       "http://127.0.0.1:$PORT/"; then
    ready=1; break
  fi
  sleep 0.1
done
if [ $ready != 1 ]; then
  echo "swift-s3: did not become ready; last log lines:" >&2
  tail -n 15 "$DIR"/log/*.log >&2 || true
  stop_all
  exit 1
fi
for b in ${SWIFT_BUCKETS:-lazycache}; do   # 409: it exists already (a reused DIR)
  code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --aws-sigv4 aws:amz:us-east-1:s3 \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
    --netrc-file <(printf 'machine 127.0.0.1 login test:tester password testing\n') "http://127.0.0.1:$PORT/$b")
  [ "$code" = 200 ] || [ "$code" = 409 ] || { echo "swift-s3: creating bucket $b: HTTP $code" >&2; stop_all; exit 1; }
done
umask 077
printf 'S3_ENDPOINT=http://127.0.0.1:%s\nS3_VHOST_ENDPOINT=http://s3.localhost:%s\nS3_REGION=us-east-1\nS3_ACCESS_KEY=test:tester\nS3_SECRET_KEY=testing\n' "$PORT" "$PORT" > "$DIR/env"
echo "swift-s3: ready at http://127.0.0.1:$PORT (credentials in $DIR/env)"
