#!/usr/bin/env bash
# `make demo`: pack a sample tree, list it, cat a file, extract it, and check the round trip.
# Usage: tools/demo.sh path/to/lazycache
set -euo pipefail
LC=${1:?usage: tools/demo.sh path/to/lazycache}
LC=$(cd "$(dirname "$LC")" && pwd)/$(basename "$LC")
WORK=$(mktemp -d /tmp/lazycache-demo.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
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
zstd -dc demo.tar.zst | tar -t | head -5
echo "demo ok"
