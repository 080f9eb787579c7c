#!/usr/bin/env bash
# Fails when a module includes a header from a module it must not depend on:
# format/ and remote/ know nothing of each other or of fs/ or tools/; fs/ never includes remote/.
# And the FUSE seam of fs/ (docs/architecture.md): only the glue (the files in GLUE below) includes
# libfuse's headers or fs/fuse_reply.h; no core file of fs/ includes a glue header; the read-only
# op table (fs/fuse_adapter.*) and the writable one (fs/overlay_fuse.*) do not include each other.
# With --fs-core-lib LIB (the built liblc_fs_core.a) and --fs-core-links LIST (its link
# libraries; CMake passes both), also that the core library neither links libfuse nor refers to
# any of its symbols.
# Usage: layering_test.sh [ROOT] [--fs-core-lib LIB --fs-core-links LIST]
set -u
root=$(dirname "$0")/..
core_lib="" core_links="" want_lib_check=0
while [ $# -gt 0 ]; do
  case "$1" in
    --fs-core-lib) core_lib=$2; want_lib_check=1; shift 2 ;;
    --fs-core-links) core_links=$2; want_lib_check=1; shift 2 ;;
    *) root=$1; shift ;;
  esac
done
cd "$root" || { echo "layering: no such directory $root"; exit 2; }
bad=0
fail() { echo "layering violation ($1):"; echo "$2"; bad=1; }
check() {  # check DIR PATTERN WHY
  local hits
  hits=$(grep -rnE "#include \"($2)/" "$1" 2>/dev/null)
  if [ -n "$hits" ]; then fail "$3" "$hits"; fi
}
check common 'format|remote|fs|tools' "common/ is the bottom layer"
check format 'remote|fs|tools' "format/ depends only on common/"
check remote 'format|fs|tools' "remote/ depends only on common/"
check fs 'remote|tools' "fs/ builds on format/ and common/ only"
# The POSIX file helpers are common/posix_files.h's; fs/local_files.h only keeps fs::make_dirs etc.
# working inside fs/, so tools/ does not reach into fs/ for them (issue 19 item 5).
hits=$(grep -rnE '#include "fs/local_files\.h"' tools 2>/dev/null)
if [ -n "$hits" ]; then fail "tools/ takes the file helpers from common/posix_files.h, not fs/local_files.h" "$hits"; fi

# The FUSE seam. The glue: the session and read-only table, the writable table, their shared
# reply helpers. Everything else of fs/ is the core (lc_fs_core).
GLUE='fs/(fuse_adapter\.(h|cpp)|overlay_fuse\.(h|cpp)|fuse_reply\.h)'
glue_only() {  # glue_only HITS WHY: fail for the hits (grep -n lines) outside the glue
  local outside
  outside=$(grep -vE "^${GLUE}:" <<<"$1" | grep -v '^$')
  if [ -n "$outside" ]; then fail "$2" "$outside"; fi
}
src_dirs=(common format remote fs tools tests bench)
existing=()
for d in "${src_dirs[@]}"; do [ -d "$d" ] && existing+=("$d"); done
fuse_includes=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(fuse3/)?fuse(_lowlevel|_common|_opt|_log)?\.h>' \
  --include='*.h' --include='*.cpp' "${existing[@]}" 2>/dev/null)
glue_only "$fuse_includes" "only the FUSE glue includes libfuse's headers"
reply_includes=$(grep -rnE '#include "fs/fuse_reply\.h"' --include='*.h' --include='*.cpp' "${existing[@]}" 2>/dev/null)
glue_only "$reply_includes" "fs/fuse_reply.h pulls in fuse_lowlevel.h: glue only"
# Core files of fs/ never include a glue header (the core does not know it is mounted).
core_files=$(find fs -maxdepth 1 -type f \( -name '*.h' -o -name '*.cpp' \) | LC_ALL=C sort | grep -vE "^${GLUE}$")
if [ -n "$core_files" ]; then
  # shellcheck disable=SC2086  # file names of fs/ have no spaces
  hits=$(grep -nE '#include "fs/(fuse_adapter|overlay_fuse|fuse_reply)\.h"' $core_files 2>/dev/null)
  if [ -n "$hits" ]; then fail "the core of fs/ includes no FUSE glue header" "$hits"; fi
fi
# The two op tables are independent: the read-only table and the session know nothing of the
# overlay; the writable table includes the session's header (fs/fuse_adapter.h) only for FuseMount.
hits=$(grep -nE '#include "fs/(overlay_fuse|overlay)\.h"' fs/fuse_adapter.h fs/fuse_adapter.cpp 2>/dev/null)
if [ -n "$hits" ]; then fail "the read-only op table does not include the writable one's headers" "$hits"; fi

# The core library: links no libfuse, refers to no libfuse symbol.
if [ $want_lib_check -eq 1 ]; then
  if [ -z "$core_lib" ] || [ ! -f "$core_lib" ]; then
    fail "lc_fs_core must be built" "no library at '${core_lib}'"
  else
    if grep -qiE '(^|;|::)fuse' <<<"$core_links"; then
      fail "lc_fs_core links no libfuse" "its link libraries: $core_links"
    fi
    syms=$(nm -u --format=posix "$core_lib" 2>/dev/null | awk '{print $1}' | grep -E '^fuse_' | LC_ALL=C sort -u)
    if [ -n "$syms" ]; then fail "lc_fs_core refers to no libfuse symbol" "$(head -n 20 <<<"$syms")"; fi
  fi
fi
[ $bad -eq 0 ] && echo "layering ok"
exit $bad
