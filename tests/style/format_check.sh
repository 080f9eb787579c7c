#!/usr/bin/env bash
# Fails when a C++ file of the project differs from what clang-format makes of it with the
# repository's .clang-format (the house style). Lists the files and shows the first lines to
# change. Fix with: clang-format -i FILE...  (clang-format 14, Debian's clang-format package).
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"
command -v clang-format >/dev/null || { echo "format_check: clang-format is not installed (make deps installs it)" >&2; exit 1; }
[ -f .clang-format ] || { echo "format_check: no .clang-format in $(pwd)" >&2; exit 1; }
# Every C++ source and header under the project's own directories: build trees excluded, and
# bench/work/, where a bench run (bench_smoke_test, beside this test under ctest -j2) unpacks
# fixtures holding third-party headers and removes them while this runs.
mapfile -t files < <(find common format remote fs tools tests bench -type f \( -name '*.cpp' -o -name '*.h' \) \
  -not -path '*/build*' -not -path 'bench/work/*' | LC_ALL=C sort)
[ ${#files[@]} -gt 0 ] || { echo "format_check: no C++ files found under $(pwd)" >&2; exit 1; }
# One clang-format process for all (a process per file takes 15 s under load).
if ! out=$(clang-format --style=file --dry-run --Werror "${files[@]}" 2>&1); then
  echo "format_check: files that differ from .clang-format (clang-format -i FILE fixes them):"
  grep -oE '^[^:]+:[0-9]+' <<<"$out" | sort -u -t: -k1,1 | sed 's/^/  /'
  printf '%s\n' "$out" | sed -n 1,30p
  exit 1
fi
echo "format_check: ${#files[@]} files match .clang-format"
