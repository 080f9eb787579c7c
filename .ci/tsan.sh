#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ThreadSanitizer run of the concurrent code: builds build-tsan (LC_SANITIZE=thread) and runs
# every CTest labelled "concurrency" (the frame fetcher, chunk cache and Filesystem of
# fs_unit_test, the chunk cache under a full disk, stores, the fault-injection doubles).
# TSan and ASan cannot share a build, hence the separate directory. Env: TSAN_JOBS (default 2).
# Only the test binaries carrying the label are built, so the cost follows the label's users.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${TSAN_BUILD:-build-tsan}
# -Wno-maybe-uninitialized: GCC 12 with -fsanitize=thread -O1 reports a false positive inside
# std::variant (Result<T>) in fs/frame_fetcher.cpp; every other warning stays an error.
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="-O1 -Wno-maybe-uninitialized" -DLC_SANITIZE=thread -DLC_WERROR=ON >/dev/null
# Tests labelled "concurrency" whose name is a build target (lc_add_test names the binary after
# the test); ctest cannot report commands of binaries not built yet.
known=$(cmake --build "$B" --target help | sed -n 's/^\.\.\. \([A-Za-z0-9_.-]*\).*/\1/p')
targets=$(cd "$B" && ctest -N -L concurrency | sed -n 's/^ *Test *#[0-9]*: \(.*\)$/\1/p' |
          while read -r t; do grep -qx "$t" <<<"$known" && echo "$t"; done | sort -u)
if [ -z "$targets" ]; then
  echo "tsan: no tests labelled concurrency" >&2
  exit 1
fi
# shellcheck disable=SC2086
cmake --build "$B" -j "${TSAN_JOBS:-2}" --target $targets
cd "$B"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --output-on-failure -L concurrency -j "${TSAN_JOBS:-2}"
