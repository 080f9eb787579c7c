#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# completion_test.sh LAZYCACHE: the bash completion script completes commands, options and
# option values from the binary's own --help (no bash-completion package needed).
set -euo pipefail
LC=$(readlink -f "${1:?usage: completion_test.sh LAZYCACHE}")
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=/dev/null
source "$SRC/packaging/completion/lazycache.bash"
fails=0
expect() {  # expect "WORDS..." "EXPECTED (space-separated, sorted)"
  local -a words
  read -r -a words <<<"$1"
  [[ $1 == *' ' ]] && words+=("")
  COMP_WORDS=("$LC" "${words[@]:1}")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  _lazycache
  local got
  got=$(printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//')
  if [ "$got" = "$2" ]; then echo "ok - '$1' -> $got"; else echo "not ok - '$1' -> '$got', expected '$2'"; fails=$((fails + 1)); fi
}
expect "lazycache mo" "mount"
expect "lazycache doc" "doctor"
expect "lazycache doctor --j" "--json"
expect "lazycache doctor --no" "--no-store-check --no-trial-mount"
expect "lazycache restore --mode " "auto extract mount"
expect "lazycache restore --mode ex" "extract"
expect "lazycache --ver" "--version"
expect "lazycache cache " "clear gc stats"
expect "lazycache cache g" "gc"
expect "lazycache cache --json " "clear gc stats"
mkdir -p /tmp/lc-compl-$$/dir.d && touch /tmp/lc-compl-$$/file.x
expect "lazycache doctor --device /tmp/lc-compl-$$/fi" "/tmp/lc-compl-$$/file.x"
rm -rf /tmp/lc-compl-$$
echo "$(( 8 - fails )) passed, $fails failed"
[ $fails = 0 ]
