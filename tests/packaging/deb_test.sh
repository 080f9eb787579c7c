#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# deb_test.sh BUILD_DIR: builds the .deb from BUILD_DIR with cpack (what `make deb` does) into a
# temp dir, runs lintian on it (no errors allowed), then packaging/validate_deb.sh (install, run,
# mount, purge). Exit 77 (skipped) when not root: installing needs it.
set -euo pipefail
BUILD=$(readlink -f "${1:?usage: deb_test.sh BUILD_DIR}")
SRC=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: installing a package needs root"; exit 77; }
OUT=$(mktemp -d /tmp/lazycache-deb-test.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

echo "== cpack -G DEB"
(cd "$BUILD" && cpack -G DEB -B "$OUT" >"$OUT/cpack.log" 2>&1) || { cat "$OUT/cpack.log"; exit 1; }
deb=$(ls "$OUT"/lazycache_*.deb)
echo "built $(basename "$deb") ($(stat -c %s "$deb") bytes)"
dpkg-deb -c "$deb"

echo "== lintian"
# Errors fail the test; warnings are printed for the reader. A sanitizer build links libasan,
# whose only consequence is a longer Depends line.
lintian --fail-on error --no-tag-display-limit "$deb" | tee "$OUT/lintian.txt" || { echo "FAIL: lintian reported errors"; exit 1; }
echo "lintian: $(grep -c '^E:' "$OUT/lintian.txt" || true) errors, $(grep -c '^W:' "$OUT/lintian.txt" || true) warnings"
# Hardening (issue 18 item 11): --pedantic must report no hardening-* tag for an optimised build
# without sanitizers (LC_HARDEN; a sanitizer build is not hardened that way).
if ! grep -q '^LC_SANITIZE:STRING=.\+' "$BUILD/CMakeCache.txt"; then
  lintian --pedantic --no-tag-display-limit "$deb" > "$OUT/pedantic.txt" 2>&1 || true
  ! grep 'hardening-' "$OUT/pedantic.txt" || { echo "FAIL: lintian --pedantic reports hardening tags"; exit 1; }
  echo "lintian --pedantic: no hardening-* tags"
fi
# The maintainer scripts are in the package (tests/packaging/maintainer_scripts_test.sh runs them).
for script in prerm postrm; do
  dpkg-deb --ctrl-tarfile "$deb" | tar -t | grep -qx "./$script" || { echo "FAIL: the package has no $script"; exit 1; }
done

"$SRC/packaging/validate_deb.sh" "$deb"
