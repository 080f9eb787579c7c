#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_smoke_test.sh ROOT BUILD OUT -- runs the benchmark entry point for under a minute
# (bench/run.sh --smoke: a ~3 MiB mixed tree, a large-fixture tree of three small .debs, a 12 MiB
# random payload, loopback link, one run) so that it cannot rot, then checks that the report was
# written and that every lazycache scenario was measured, not skipped, and that the Summary has
# the cache-overhead table. Asserts nothing about timings: benchmarks are not tests.
set -euo pipefail
# A failing command ends the script under set -e; say which, so that a CI log is never empty.
trap 'echo "bench_smoke_test.sh: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)" >&2' ERR
ROOT=${1:?usage: bench_smoke_test.sh ROOT BUILD OUT}
BUILD=${2:?}
OUT=${3:?}
rm -rf "$OUT"
mkdir -p "$OUT"
# stdin closed, as CI starts tests: run.sh must not depend on it.
LC_BUILD=$BUILD "$ROOT/bench/run.sh" --smoke --no-build --build "$BUILD" --out "$OUT" <&-
for f in RESULTS.md results.json results.tsv; do
  [ -s "$OUT/$f" ] || { echo "bench smoke: $OUT/$f missing or empty" >&2; exit 1; }
done
fail=0
for scen in pack save restore mount_ready unmount read_cold find_warm read_warm job_large job_large_learned job_large_traced \
            transfer_save transfer_restore; do
  if ! awk -F'\t' -v s="$scen" '$1 == s && $4 ~ /^lazycache/ && $5 ~ /^[0-9.]+$/ { found = 1 } END { exit !found }' "$OUT/results.tsv"; then
    echo "bench smoke: no measured lazycache row for scenario $scen" >&2
    fail=1
  fi
done
# Refused by design, and said so: lazycache's --part-size 4M of the transfer sweep (S3's minimum
# part is 5 MiB).
if awk -F'\t' '$4 ~ /^lazycache/ && /not_measured/ && !/5M to 5G/ { print; bad = 1 } END { exit !bad }' "$OUT/results.tsv" >&2; then
  echo "bench smoke: lazycache rows above were not measured" >&2
  fail=1
fi
grep -q '^### Cache overhead' "$OUT/RESULTS.md" && grep -q '^| Partial job (large) | large | loopback |' "$OUT/RESULTS.md" ||
  { echo "bench smoke: RESULTS.md has no cache-overhead row for the large job" >&2; fail=1; }
[ -s "$OUT/results.png" ] || { echo "bench smoke: no results.png" >&2; fail=1; }
[ $fail = 0 ] && echo "bench smoke: ok ($(($(wc -l < "$OUT/results.tsv") - 1)) rows)"
exit $fail
