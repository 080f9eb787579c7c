#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/npm/install_on_mount_test.sh LAZYCACHE WORK
# `npm install` into a mounted node_modules, as a CI job with a warm cache does it:
#  1. a small project (two small packages from the npm registry) is installed on disk and its
#     node_modules saved under npm-v1 (local-directory store);
#  2. node_modules is mounted writable with --key npm-v2 --restore-keys npm- (a restore-key hit),
#     and `npm install` adds another package into the mount; `npm ls` is happy on the mount;
#  3. `unmount --save` saves the merged view under npm-v2; npm-v2 mounted again shows exactly the
#     tree npm left (content, types, modes, symlinks), and `npm ls` is happy on it.
# npm's download cache lives in WORK/npm-cache (kept between runs). Skipped (exit 0, with a
# message) without npm or /dev/fuse.
set -euo pipefail
LC=$1; WORK=$2
if ! command -v npm >/dev/null; then echo "SKIP: npm is missing (apt-get install npm)"; exit 0; fi
if ! { exec 9<>/dev/fuse; } 2>/dev/null; then echo "SKIP: /dev/fuse cannot be opened"; exit 0; fi
exec 9>&-
mkdir -p "$WORK/npm-cache"
W=$(mktemp -d /tmp/lc-npm-install.XXXXXX)
export LAZYCACHE_RUN_DIR=$W/run LAZYCACHE_CACHE_DIR=$W/chunks LAZYCACHE_STORE=$W/store
export npm_config_cache=$WORK/npm-cache npm_config_audit=false npm_config_fund=false \
       npm_config_update_notifier=false npm_config_loglevel=error
P=$W/project
NM=$P/node_modules
cleanup() {
  if mountpoint -q "$NM" 2>/dev/null; then "$LC" unmount --lazy "$NM" >/dev/null 2>&1 || fusermount3 -u -z "$NM" || true; fi
  rm -rf "$W"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# type, mode, size of files, symlink target, path, then every file's content: what npm left.
snapshot() { (cd "$1" && find . -mindepth 1 -printf '%y %m %p %l\n' | LC_ALL=C sort
              find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r md5sum); }

# 1. The project as the last job left it, saved.
mkdir -p "$P"
cat > "$P/package.json" <<'JSON'
{ "name": "lc-npm-test", "version": "1.0.0", "private": true,
  "dependencies": { "is-number": "7.0.0", "ms": "2.1.3" } }
JSON
(cd "$P" && npm install --ignore-scripts) || fail "npm install of the base project (registry reachable?)"
[ -f "$NM/is-number/package.json" ] || fail "npm did not install is-number"
"$LC" save --key npm-v1 "$NM" > "$W/out" || { cat "$W/out"; fail "save npm-v1"; }
rm -rf "$NM"

# 2. Next job: restore-key hit, mounted writable, npm adds a package.
mkdir -p "$NM"
"$LC" mount --key npm-v2 --restore-keys npm- "$NM" > "$W/out" || { cat "$W/out"; fail "mount"; }
grep -q "cache-matched-key=npm-v1" "$W/out" || fail "expected a restore-key hit on npm-v1: $(cat "$W/out")"
mountpoint -q "$NM" || fail "node_modules is not mounted"
(cd "$P" && npm install --ignore-scripts left-pad@1.3.0) || fail "npm install left-pad into the mount"
[ -f "$NM/left-pad/package.json" ] || fail "left-pad is not in the mounted node_modules"
(cd "$P" && npm ls --all > "$W/npm-ls-mounted") || { cat "$W/npm-ls-mounted"; fail "npm ls on the mount"; }
grep -q "left-pad@1.3.0" "$W/npm-ls-mounted" || fail "npm ls does not list left-pad: $(cat "$W/npm-ls-mounted")"
(cd "$P" && node -e 'const lp = require("left-pad"), n = require("is-number"); if (lp("7", 3, "0") !== "007" || !n(7)) process.exit(1)') ||
  fail "node cannot use the packages on the mount"
snapshot "$NM" > "$W/what-npm-left"
"$LC" unmount --save "$NM" > "$W/out" || { cat "$W/out"; fail "unmount --save"; }
grep -q "as key npm-v2" "$W/out" || fail "unmount --save did not save npm-v2: $(cat "$W/out")"
mountpoint -q "$NM" && fail "still mounted after unmount --save"

# 3. The new entry mounted: the tree npm left, and npm agrees.
"$LC" mount --key npm-v2 "$NM" > "$W/out" || { cat "$W/out"; fail "mount npm-v2"; }
grep -q "cache-hit=true" "$W/out" || fail "npm-v2 is not an exact hit: $(cat "$W/out")"
snapshot "$NM" > "$W/restored"
if ! cmp -s "$W/what-npm-left" "$W/restored"; then diff "$W/what-npm-left" "$W/restored" | head -20; fail "npm-v2 differs from the tree npm left"; fi
(cd "$P" && npm ls --all > "$W/npm-ls-v2") || { cat "$W/npm-ls-v2"; fail "npm ls on npm-v2"; }
for pkg in is-number@7.0.0 ms@2.1.3 left-pad@1.3.0; do grep -q "$pkg" "$W/npm-ls-v2" || fail "npm ls on npm-v2 lacks $pkg"; done
"$LC" unmount "$NM" > /dev/null || fail "unmount npm-v2"
echo "OK: npm install on the mount, saved as npm-v2, remounted identical ($(grep -c . "$W/restored") lines of snapshot)"
