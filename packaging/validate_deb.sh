#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# validate_deb.sh PACKAGE.deb: installs the package on this machine with apt-get (which pulls in
# its dependencies, as on a clean runner), checks what it installed, runs the installed binary
# (--version, completion, pack, then the README's quick start: save, mount, read, unmount), then
# purges it and checks nothing is left.
# Runs as root. Refuses to touch a lazycache package that was installed before it started.
# Exit 0 when everything held; the first failed check is printed as "FAIL: ...".
set -euo pipefail
deb=${1:?usage: validate_deb.sh PACKAGE.deb}
deb=$(readlink -f "$deb")
[ "$(id -u)" = 0 ] || { echo "validate_deb: must run as root (it installs a package)" >&2; exit 2; }
if dpkg-query -W -f='${Status}' lazycache 2>/dev/null | grep -q 'install ok installed'; then
  echo "validate_deb: a lazycache package is already installed here; not replacing it" >&2
  exit 2
fi
fail() { echo "FAIL: $*" >&2; exit 1; }
WORK=$(mktemp -d /tmp/lazycache-validate.XXXXXX)
installed=0
cleanup() {
  set +e
  mountpoint -q "$WORK/tree" 2>/dev/null && { /usr/bin/lazycache unmount "$WORK/tree" || fusermount3 -u -z "$WORK/tree"; }
  [ $installed = 1 ] && apt-get purge -y -qq -o DPkg::Lock::Timeout=300 lazycache >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

version=$(dpkg-deb -f "$deb" Version)
depends=$(dpkg-deb -f "$deb" Depends)
echo "package: lazycache $version; Depends: $depends"
for dep in fuse3 libfuse3-3 libzstd1 libcurl4 libssl3 liblmdb0 libxxhash0; do
  [[ ",$depends," =~ [,\ ]$dep[\ ,\(] ]] || fail "Depends lacks $dep"
done

echo "== apt-get install $deb"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "$deb" >"$WORK/apt.log" 2>&1 ||
  { cat "$WORK/apt.log" >&2; fail "apt-get install $deb"; }
installed=1
for f in /usr/bin/lazycache /usr/share/man/man1/lazycache.1.gz /usr/share/bash-completion/completions/lazycache \
         /etc/lazycache/config /usr/share/doc/lazycache/copyright; do
  [ -e "$f" ] || fail "the package did not install $f"
done
dpkg-query -W -f='${Conffiles}\n' lazycache | grep -q '/etc/lazycache/config' || fail "/etc/lazycache/config is not a conffile"
man -l /usr/share/man/man1/lazycache.1.gz 2>/dev/null | grep -q 'lazycache - CI cache that mounts' || fail "man page does not render"

echo "== lazycache --version"
out=$(/usr/bin/lazycache --version)
[ "$out" = "lazycache $version" ] || fail "--version printed '$out', expected 'lazycache $version'"

echo "== bash completion"
words=$(bash -c 'source /usr/share/bash-completion/completions/lazycache
  COMP_WORDS=(lazycache mo); COMP_CWORD=1; _lazycache; printf "%s\n" "${COMPREPLY[@]}"')
[ "$words" = "mount" ] || fail "completing 'lazycache mo' gave '$words'"

echo "== pack"
mkdir -p "$WORK/tree/sub"
printf 'hello from the package test\n' > "$WORK/tree/sub/hello.txt"
head -c 200000 /dev/urandom > "$WORK/tree/blob"
(cd "$WORK" && /usr/bin/lazycache pack -q -o cache.tar.zst tree) || fail "pack"
zstd -dc "$WORK/cache.tar.zst" | tar -t | grep -q '^tree/sub/hello.txt$' || fail "stock zstd | tar cannot list the archive"

# The README's quick start, with the store named in a settings file (LAZYCACHE_CONFIG stands in
# for /etc/lazycache/config, which is left as shipped).
printf 'LAZYCACHE_STORE=%s\n' "$WORK/store" > "$WORK/config"
export LAZYCACHE_CONFIG="$WORK/config" LAZYCACHE_CACHE_DIR="$WORK/chunks"
echo "== save --key (store from the settings file)"
/usr/bin/lazycache save --key deps-v1 "$WORK/tree" || fail "save"
[ -n "$(find "$WORK/store" -name '*.tar.zst' -print -quit)" ] || fail "save wrote no archive under $WORK/store"
mv "$WORK/tree" "$WORK/tree.orig"
if /usr/bin/lazycache doctor >/dev/null 2>&1; then
  echo "== mount --key, read, unmount"
  /usr/bin/lazycache mount --key deps-v1 "$WORK/tree" || fail "mount"
  mountpoint -q "$WORK/tree" || fail "mount returned but $WORK/tree is not a mount point"
  diff -r "$WORK/tree.orig" "$WORK/tree" || fail "files read through the mount differ"
  /usr/bin/lazycache unmount "$WORK/tree" || fail "unmount"
  mountpoint -q "$WORK/tree" && fail "still mounted after unmount"
  # Left mounted on purpose: removing the package must detach it and stop its daemon (prerm).
  /usr/bin/lazycache mount --key deps-v1 "$WORK/tree" || fail "mount (for the removal check)"
  left_mounted=1
else
  echo "== FUSE unusable here ($(/usr/bin/lazycache doctor | head -1)): restore extracts"
  /usr/bin/lazycache restore --key deps-v1 "$WORK/tree" || fail "restore"
  diff -r "$WORK/tree.orig" "$WORK/tree" || fail "restored files differ"
fi
unset LAZYCACHE_CONFIG LAZYCACHE_CACHE_DIR

echo "== apt-get purge"
daemon=$(sed -n 's/^pid=//p' $(grep -l "^mountpoint=$WORK/tree\$" /run/lazycache/mount-*.state 2>/dev/null) < /dev/null)
apt-get purge -y -qq -o DPkg::Lock::Timeout=300 lazycache >/dev/null 2>&1 || fail "purge"
installed=0
for f in /usr/bin/lazycache /etc/lazycache/config /usr/share/man/man1/lazycache.1.gz; do
  [ ! -e "$f" ] || fail "$f is still there after purge"
done
if [ "${left_mounted:-0}" = 1 ]; then
  mountpoint -q "$WORK/tree" && fail "the package's removal left $WORK/tree mounted"
  [ -n "$daemon" ] || fail "no state file named the daemon of $WORK/tree"
  for _ in $(seq 100); do [ -d "/proc/$daemon" ] || break; sleep 0.1; done
  [ ! -d "/proc/$daemon" ] || fail "mount daemon $daemon still runs after the package's removal"
  echo "removal detached the mount and stopped daemon $daemon"
fi
echo "validate_deb: ok"
