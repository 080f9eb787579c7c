#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_fixture_test.sh ROOT OUT -- the large fixture's script is deterministic: the smoke package
# list (three small pinned .debs) built twice in two directories gives the same manifest (type,
# mode, size, link count, symlink target, SHA-256 and path of every entry), and that manifest is
# the one recorded in bench/fixture-large/manifest-smoke.sha256 (so a change of the script's
# output shows). A rebuild with the same list reuses the tree; a version the archive does not
# have fails with its name and leaves no tree behind.
set -euo pipefail
ROOT=${1:?usage: bench_fixture_test.sh ROOT OUT}
OUT=${2:?}
MAKE=$ROOT/bench/make-fixture-large.sh
LIST=$ROOT/bench/fixture-large/packages-smoke.txt
rm -rf "$OUT"
mkdir -p "$OUT"
fail() { echo "bench_fixture_test: $*" >&2; exit 1; }

"$MAKE" "$OUT/a" "$LIST"
# The second build starts from a's .debs (apt already checked them against the archive's hashes;
# the recorded manifest below holds the download to the same bytes on every machine).
mkdir -p "$OUT/b" && cp -r "$OUT/a/debs" "$OUT/b/"
"$MAKE" "$OUT/b" "$LIST"
[ -s "$OUT/a/manifest.txt" ] || fail "no manifest in $OUT/a"
cmp "$OUT/a/manifest.txt" "$OUT/b/manifest.txt" || fail "two builds of the same list differ: diff $OUT/a/manifest.txt $OUT/b/manifest.txt"
want=$(cut -d' ' -f1 "$ROOT/bench/fixture-large/manifest-smoke.sha256")
got=$(sha256sum < "$OUT/a/manifest.txt" | cut -d' ' -f1)
[ "$want" = "$got" ] || fail "manifest $got is not the recorded $want (bench/fixture-large/manifest-smoke.sha256)"
# The manifest describes the tree as it is.
n=$(find "$OUT/a/tree" -mindepth 1 | wc -l)
[ "$n" = "$(wc -l < "$OUT/a/manifest.txt")" ] || fail "manifest has $(wc -l < "$OUT/a/manifest.txt") lines for $n entries"

"$MAKE" "$OUT/a" "$LIST" | grep -q reusing || fail "an unchanged list did not reuse the tree"

printf 'python3-six 0.0-not-a-version\n' > "$OUT/bad.txt"
if LC_FIXTURE_APT_UPDATE=0 "$MAKE" "$OUT/c" "$OUT/bad.txt" 2> "$OUT/bad.err"; then fail "a missing version did not fail"; fi
grep -q 'python3-six=0.0-not-a-version' "$OUT/bad.err" || fail "the error does not name the package: $(cat "$OUT/bad.err")"
[ ! -e "$OUT/c/tree" ] || fail "a failed build left $OUT/c/tree"
echo "bench_fixture_test: ok ($(wc -l < "$OUT/a/manifest.txt") entries, manifest $got)"
rm -rf "$OUT"
