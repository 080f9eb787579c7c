#!/usr/bin/env bash
# The layering check must fail on each rule it holds: a small tree that passes, then one
# violation at a time (a core file of fs/ including libfuse or a glue header, the read-only op
# table including the writable one's header, fs/ including remote/, a core library that links
# libfuse or refers to a fuse_ symbol, a core library that was not built), each expected to fail
# with its rule named. Reads no stdin; needs cc, ar and nm (build-essential).
# Each failure must name its rule (the words in parentheses of "layering violation (...)").
# Usage: layering_selftest.sh PATH/TO/layering_test.sh
set -euo pipefail
check=$1
work=$(mktemp -d /tmp/lc-layering-selftest.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0

make_tree() {  # a minimal tree that obeys every rule
  rm -rf "$work/t"
  mkdir -p "$work/t"/{common,format,remote,fs,tools,tests}
  printf '#pragma once\n' >"$work/t/common/status.h"
  printf '#include "common/status.h"\n' >"$work/t/format/archive.h"
  printf '#include "common/status.h"\n' >"$work/t/remote/store.h"
  printf '#include "format/archive.h"\n' >"$work/t/fs/filesystem.h"
  printf '#include "fs/filesystem.h"\n' >"$work/t/fs/overlay.h"
  printf '#include "fs/filesystem.h"\n' >"$work/t/fs/fuse_adapter.h"
  printf '#include "fs/fuse_adapter.h"\n#include <fuse_lowlevel.h>\n#include "fs/fuse_reply.h"\n' >"$work/t/fs/fuse_adapter.cpp"
  printf '#include <fuse_lowlevel.h>\n' >"$work/t/fs/fuse_reply.h"
  printf '#include "fs/fuse_adapter.h"\n' >"$work/t/fs/overlay_fuse.h"
  printf '#include "fs/overlay_fuse.h"\n#include "fs/overlay.h"\n#include "fs/fuse_reply.h"\n' >"$work/t/fs/overlay_fuse.cpp"
  printf '#include "fs/overlay_fuse.h"\n#include "remote/store.h"\n' >"$work/t/tools/cmd_mount.cpp"
}

expect() {  # expect pass|RULE WHAT [ARGS...]: runs the check on the tree; RULE: the words its failure must name
  local want=$1 what=$2
  shift 2
  local out rc=0
  out=$("$check" "$work/t" "$@" 2>&1) || rc=$?
  if { [ "$want" = pass ] && [ $rc -ne 0 ]; } || { [ "$want" != pass ] && { [ $rc -eq 0 ] || ! grep -qF "($want" <<<"$out"; }; }; then
    echo "FAILED: $what: expected ${want}, got exit $rc:"
    printf '%s\n' "$out" | sed 's/^/    /'
    failures=$((failures + 1))
  else
    echo "ok: $what (${want})"
  fi
}

# Static archives standing in for lc_fs_core: one without and one with a libfuse reference.
printf 'int core_fn(int x) { return x + 1; }\n' >"$work/clean.c"
printf 'extern int fuse_reply_err(void *req, int err);\nint core_fn(void) { return fuse_reply_err(0, 5); }\n' >"$work/dirty.c"
for v in clean dirty; do
  cc -c -o "$work/$v.o" "$work/$v.c"
  ar rcs "$work/lib$v.a" "$work/$v.o"
done

make_tree
expect pass "a tree that obeys every rule"
expect pass "a core library without libfuse" --fs-core-lib "$work/libclean.a" --fs-core-links "lc_format;lc_common;PkgConfig::LMDB"

make_tree
printf '#include <fuse_lowlevel.h>\n' >>"$work/t/fs/filesystem.h"
expect "only the FUSE glue includes" "a core header including fuse_lowlevel.h"

make_tree
printf '#include <fuse3/fuse_lowlevel.h>\n' >"$work/t/fs/chunk_cache.cpp"
expect "only the FUSE glue includes" "a core source including fuse3/fuse_lowlevel.h"

make_tree
printf '#include <fuse.h>\n' >"$work/t/tools/cmd_mount.cpp"
expect "only the FUSE glue includes" "tools/ including fuse.h"

make_tree
printf '#include "fs/local_files.h"\n' >>"$work/t/tools/cmd_mount.cpp"
expect "tools/ takes the file helpers from common/posix_files.h" "tools/ including fs/local_files.h"

make_tree
printf '#include "fs/fuse_reply.h"\n' >"$work/t/fs/overlay_names.cpp"
expect "fs/fuse_reply.h pulls in" "a core file including fs/fuse_reply.h"

make_tree
printf '#include "fs/fuse_adapter.h"\n' >>"$work/t/fs/overlay.h"
expect "the core of fs/ includes no FUSE glue" "a core header including the glue's fs/fuse_adapter.h"

make_tree
printf '#include "fs/overlay_fuse.h"\n' >>"$work/t/fs/fuse_adapter.cpp"
expect "the read-only op table does not include" "the read-only op table including the writable one's header"

make_tree
printf '#include "remote/store.h"\n' >>"$work/t/fs/filesystem.h"
expect "fs/ builds on format/" "fs/ including remote/"

make_tree
expect "lc_fs_core links no libfuse" "a core library that links libfuse" --fs-core-lib "$work/libclean.a" --fs-core-links "lc_format;PkgConfig::FUSE3"
expect "lc_fs_core refers to no libfuse symbol" "a core library referring to fuse_reply_err" --fs-core-lib "$work/libdirty.a" --fs-core-links "lc_format"
expect "lc_fs_core must be built" "a core library that was not built" --fs-core-lib "$work/missing.a" --fs-core-links "lc_format"

if [ $failures -ne 0 ]; then
  echo "layering_selftest: $failures case(s) wrong"
  exit 1
fi
echo "layering_selftest: every rule fails when broken"
