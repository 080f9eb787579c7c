#!/usr/bin/env bash
# `make demo`: the main job on the embedded default store (a local directory, no server):
# pack a sample tree and inspect it, save it under a key, mount it lazily where it was, read
# from it, change it, `unmount --save` the change as a new entry, and mount that to check it.
# Usage: tools/demo.sh path/to/lazycache
set -euo pipefail
LC=${1:?usage: tools/demo.sh path/to/lazycache}
LC=$(cd "$(dirname "$LC")" && pwd)/$(basename "$LC")
WORK=$(mktemp -d /tmp/lazycache-demo.XXXXXX)
cleanup() {  # never leave a mount behind, even when a step fails
  for m in "$WORK/project"; do
    mountpoint -q "$m" 2>/dev/null && { "$LC" unmount "$m" >/dev/null 2>&1 || fusermount3 -uz "$m"; }
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK"

echo "== a sample tree in $WORK/project"
mkdir -p project/src project/node_modules/.bin project/node_modules/left-pad project/empty
printf 'module.exports = (s, n) => s.padStart(n);\n' > project/node_modules/left-pad/index.js
printf '{"name":"left-pad","version":"1.3.0"}\n' > project/node_modules/left-pad/package.json
ln -s ../left-pad/index.js project/node_modules/.bin/left-pad
printf 'int main(void) { return 0; }\n' > project/src/main.c
ln project/src/main.c project/src/main-hardlink.c
head -c 3000000 /dev/urandom > project/blob.bin
: > project/empty-file
chmod 0750 project/src

echo "== pack"
"$LC" pack -o demo.tar.zst --frame-size 1M project
echo "== info"
"$LC" info demo.tar.zst
echo "== ls -l"
"$LC" ls -l demo.tar.zst
echo "== cat project/node_modules/left-pad/package.json"
"$LC" cat demo.tar.zst project/node_modules/left-pad/package.json
echo "== verify"
"$LC" verify demo.tar.zst
echo "== extract -C out"
"$LC" extract demo.tar.zst -C out
diff -r --no-dereference project out/project && echo "round trip: identical content"
echo "== stock tools: zstd -d | tar -t"
zstd -dc demo.tar.zst | tar -t > members.txt  # (not piped to head: pipefail)
head -5 members.txt

# The job: save, then restore by mounting. The store is the embedded default (a local
# directory: /var/cache/lazycache/store as root) unless LAZYCACHE_STORE says otherwise.
RUN=demo-$(date +%s)-$$
KEY=$RUN-1
echo "== save --key $KEY project"
"$LC" save --key "$KEY" project
mv project original
mkdir project
# The next job's primary key misses (its lock file changed, say); the restore-keys prefix
# finds the first entry, which is mounted, and the job's changes are saved under the new key.
NEXT=$RUN-2
echo "== mount --key $NEXT --restore-keys $RUN- project   (metadata from the index at once, data lazily)"
"$LC" mount --key "$NEXT" --restore-keys "$RUN-" project
echo "== read through the mount"
cat project/node_modules/left-pad/package.json
ls -l project/node_modules/.bin
"$LC" status project
diff -r --no-dereference original project && echo "mounted tree: identical to the original"
echo "== the job changes the cache: add a file, then unmount --save"
printf 'built\n' > project/build-output.txt
"$LC" unmount --save project
echo "== mount the new entry $NEXT and check the change is there"
"$LC" mount --key "$NEXT" project
test "$(cat project/build-output.txt)" = built && echo "new entry holds the job's change"
"$LC" unmount project
echo "demo ok"
