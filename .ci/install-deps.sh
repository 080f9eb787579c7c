#!/usr/bin/env bash
# Installs the Debian packages lazycache builds, tests and benchmarks with, only those missing.
# Runs as root on a fresh Debian 12 (make demo / make test call it first).
set -euo pipefail
PKGS=(build-essential cmake pkg-config clang lld libclang-rt-14-dev
      libfuse3-dev fuse3 libzstd-dev zstd liblmdb-dev lmdb-utils libxxhash-dev catch2
      libcurl4-openssl-dev libssl-dev curl libarchive-tools python3 attr
      nodejs lintian strace clang-format clang-tidy
      # the S3 test servers and interop peers: installed here, once and serially, so that tests
      # starting in parallel under ctest -j never race for the dpkg lock
      swift swift-proxy swift-account swift-container swift-object python3-swift memcached rclone
      # the bench smoke test's peers and report tools
      squashfuse squashfs-tools gnuplot-nox jq bc openssl)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: missing packages: ${missing[*]} (run as root, or install them with apt-get)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
