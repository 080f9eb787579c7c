#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make-fixture-node.sh DIR -- a reproducible node_modules tree in DIR/node_modules
# (about 200 MiB, about 29k files, 4k directories): the many-small-files case of a CI cache.
#
# The top-level packages are pinned in bench/fixture-node/package.json and the whole transitive
# tree by bench/fixture-node/package-lock.json, installed with `npm ci` from the npm registry.
# No install scripts run, so the tree is the same bytes on every machine. To re-resolve the tree,
# delete the lock, rerun, and commit DIR/package-lock.json as the new lock.
# Reuses DIR when it already holds a tree built from the same lock (stamp file).
set -euo pipefail
# A failing command ends the script under set -e; say which, so that a CI log is never empty.
trap 'echo "make-fixture-node.sh: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)" >&2' ERR
DIR=${1:?usage: make-fixture-node.sh DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
SPEC=$HERE/fixture-node
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
stamp=$DIR/.fixture-stamp
want=$(cat "$SPEC"/package*.json | md5sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -d "$DIR/node_modules" ]; then
  echo "fixture-node: reusing $DIR/node_modules"
  exit 0
fi
command -v npm >/dev/null || { echo "make-fixture-node.sh: npm is missing (apt-get install npm)" >&2; exit 1; }
rm -rf "$DIR/node_modules" "$stamp"
cp "$SPEC/package.json" "$DIR/package.json"
flags=(--no-audit --no-fund --ignore-scripts --loglevel=error)
if [ -f "$SPEC/package-lock.json" ]; then
  cp "$SPEC/package-lock.json" "$DIR/package-lock.json"
  (cd "$DIR" && npm ci "${flags[@]}")
else
  (cd "$DIR" && npm install "${flags[@]}")
  echo "fixture-node: no lock in $SPEC; copy $DIR/package-lock.json there to pin this tree" >&2
fi
echo "$want" > "$stamp"
echo "fixture-node: bytes=$(du -sb "$DIR/node_modules" | cut -f1)" \
  "files=$(find "$DIR/node_modules" -type f | wc -l) dirs=$(find "$DIR/node_modules" -type d | wc -l)"
