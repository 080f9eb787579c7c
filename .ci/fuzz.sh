#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `make fuzz`: builds the libFuzzer targets with clang (ASan+UBSan, coverage on every library)
# in build-fuzz/ and runs each for FUZZ_SECONDS (default 60) from the checked-in corpus.
# New inputs go to build-fuzz/corpus/<target> (the checked-in corpus is only read); a crash
# leaves build-fuzz/crashes/<target>/crash-* and makes the script fail. Add each crash input
# to tests/fuzz/corpus/<target>/ together with its fix: the corpus replay tests (ctest
# fuzz_*_corpus) then guard it forever.
# Env: FUZZ_SECONDS, FUZZ_TARGETS (space-separated subset), FUZZ_JOBS (parallel targets, default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-60}
TARGETS=${FUZZ_TARGETS:-"fuzz_seek_table fuzz_index fuzz_tar_reader fuzz_archive fuzz_store_url fuzz_sigv4 fuzz_s3_response"}
B=build-fuzz
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DLC_BUILD_FUZZERS=ON -DLC_SANITIZE=address,undefined -DLC_WERROR=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link" >/dev/null
# shellcheck disable=SC2086
cmake --build $B -j "${FUZZ_JOBS:-2}" --target $TARGETS
status=0
for t in $TARGETS; do
  mkdir -p "$B/corpus/$t" "$B/crashes/$t"
  echo "fuzz: $t for ${SECONDS_EACH}s"
  if ! "$B/tests/fuzz/$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$B/crashes/$t/" "$B/corpus/$t" "tests/fuzz/corpus/$t" >"$B/$t.log" 2>&1; then
    echo "fuzz: $t FAILED; see $B/$t.log and $B/crashes/$t/" >&2
    tail -30 "$B/$t.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$B/$t.log" | tail -2
  fi
done
exit $status
