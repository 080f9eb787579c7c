#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/store_cli/restore_transfer_test.sh LAZYCACHE -- issue 16 item 3: `restore --extract` and
# `extract --key` read the archive with the plan the transfer options give: --part-size sets the
# bytes per range read (so smaller parts mean more reads), --concurrency the reads in flight, and
# the summary line says which plan ran; a bad value is refused before anything is written. The
# restored tree is the saved one whatever the plan.
set -euo pipefail
LC=$1
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
W=$(mktemp -d /tmp/lc-restore-transfer.XXXXXX)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

S=$W/src/tree
mkdir -p "$S/big" "$S/small"
head -c 24000000 /dev/urandom > "$S/big/blob"           # incompressible: 24 frames of 1 MiB
for i in $(seq 1 50); do echo "small $i" > "$S/small/f$i"; done
"$LC" save --store "$W/store" --key k --frame-size 1M "$S" > "$W/save.out" 2>&1 || { cat "$W/save.out"; fail "save"; }

# restore_with OUT ARGS...: restores into OUT, prints the "N range requests (C x SIZE)" summary.
restore_with() {
  local out=$1; shift
  "$LC" restore --store "$W/store" --any-paths --key k --extract "$@" "$out" > "$W/r.out" 2>&1 || { cat "$W/r.out"; fail "restore $*"; }
  diff -r "$S" "$out" || fail "restore $* gave a different tree"
  grep -o '[0-9]* range requests.*' "$W/r.out" || fail "no request count in the summary: $(cat "$W/r.out")"
}
small=$(restore_with "$W/o1" --part-size 5M --concurrency 2)
large=$(restore_with "$W/o2" --part-size 16M --concurrency 2)
auto=$(restore_with "$W/o3")
echo "5M parts: $small; 16M parts: $large; auto: $auto"
n_small=${small%% *} n_large=${large%% *}
# 24 MiB of frame data: 5 parts of 5 MiB against 2 of 16 MiB (plus the same index reads).
[ $((n_small - n_large)) -ge 3 ] || fail "--part-size did not change the range reads: $n_small vs $n_large"
case $small in *"(2 x 5.0 MiB)") ;; *) fail "--part-size 5M --concurrency 2 not said: $small" ;; esac
case $auto in *"(8 x "*) ;; *) fail "auto plan is not 8 reads at once: $auto" ;; esac
# The first 16 MiB of an exact key's entry are read beside its lookup (tools/early_head.h): into
# the saved path itself, so the paths' version names the object before it is found.
case $auto in *"beside the lookup"*) fail "--any-paths cannot name the object before the lookup: $auto" ;; esac
mv "$S" "$W/src/tree.orig"
"$LC" restore --store "$W/store" --key k --extract "$S" > "$W/r.out" 2>&1 || { cat "$W/r.out"; fail "exact restore"; }
diff -r "$W/src/tree.orig" "$S" || fail "the exact restore (early head) gave a different tree"
grep -q "range requests (8 x .*) + 4 read beside the lookup" "$W/r.out" || fail "early head not used on an exact hit: $(cat "$W/r.out")"
# A restore key's match is another object: the early reads (of the exact name, missing) are dropped.
rm -rf "$S"
"$LC" restore --store "$W/store" --key other --restore-keys k --extract "$S" > "$W/r.out" 2>&1 || { cat "$W/r.out"; fail "restore-keys restore"; }
diff -r "$W/src/tree.orig" "$S" || fail "the restore key's match gave a different tree"
grep -q "beside the lookup" "$W/r.out" && fail "early head used for a restore key's match: $(cat "$W/r.out")"
rm -rf "$W/src/tree.orig"  # $S holds the same tree again

# Range reads may be smaller than S3's 5 MiB upload parts (the bench sweep's 8 x 4 MiB): 2 MiB
# parts make more reads than 5 MiB ones. Uploads still refuse them, naming S3's rule.
tiny=$(restore_with "$W/o4" --part-size 2M --concurrency 2)
[ "${tiny%% *}" -gt "$n_small" ] || fail "--part-size 2M did not make more range reads than 5M: $tiny vs $small"
if "$LC" save --store "$W/store" --key k4 --part-size 4M "$S" > "$W/s4.out" 2>&1; then fail "save --part-size 4M accepted"; fi
grep -q '5M to 5G' "$W/s4.out" || fail "save --part-size 4M: the refusal does not say S3's rule: $(cat "$W/s4.out")"
if "$LC" restore --store "$W/store" --any-paths --key k --extract --part-size 512K "$W/bad2" > "$W/bad2.out" 2>&1; then fail "--part-size 512K accepted"; fi
grep -q '1M to 5G' "$W/bad2.out" || fail "--part-size 512K: $(cat "$W/bad2.out")"

# extract --key shares the engine and the options.
"$LC" extract -q --store "$W/store" --key k --part-size 5M --concurrency 3 -C "$W/x" > "$W/x.out" 2>&1 || { cat "$W/x.out"; fail "extract --key"; }
diff -r "$S" "$W/x/$(basename "$W")/src/tree" >/dev/null 2>&1 || diff -r "$S" "$W/x${S}" || fail "extract --key gave a different tree"

# A bad plan is refused before anything is written.
if "$LC" restore --store "$W/store" --any-paths --key k --extract --concurrency 0 "$W/bad" > "$W/bad.out" 2>&1; then fail "--concurrency 0 accepted"; fi
grep -q -- '--concurrency' "$W/bad.out" || fail "the refusal does not name the option: $(cat "$W/bad.out")"
[ ! -e "$W/bad" ] || fail "a refused restore left $W/bad"
echo ok
