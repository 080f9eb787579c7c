#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Faults between lazycache and a real S3 server: the fault proxy in front of Swift s3api.

Usage: swift_faults_test.py LAZYCACHE ENV_FILE

ENV_FILE is what tests/servers/swift-s3.sh writes (S3_ENDPOINT, S3_REGION, S3_ACCESS_KEY,
S3_SECRET_KEY; the CTest fixture "swift"). The entry is saved into bucket "lazycache" under a key
of its own, then read back by lazycache signing real SigV4 requests that the proxy forwards
unchanged (Host included, so Swift verifies every signature) and faults on the way back:
connection reset mid-body, stall (short, and long then close), a 503 burst with Retry-After,
and a truncated body, each transient (the first two data GETs) and, for some, persistent. Each
runs on a mount read (right bytes, or an error within read-timeout + margin; then the same
daemon serves everything once the fault clears) and on `restore --extract` (an identical tree,
or a non-zero exit with a message, in bounded time). The checks are mount_faults_test.py's.
Skips (exit 77) when FUSE is not usable or the env file is missing.
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lc_harness  # noqa: E402
import mount_faults_test as mf  # noqa: E402

FAULTS = dict(mf.SCENARIOS)
# (fault, mode, also on restore --extract?). A long stall costs the HTTP client's low-speed
# timeout per attempt on extract (about a minute): the mount covers it; extract gets the short one.
CASES = [
    ("reset", "transient", True),
    ("reset", "persistent", True),
    ("stall_short", "transient", True),
    ("stall_then_close", "persistent", False),
    ("http_503_retry_after", "transient", True),
    ("http_503_retry_after", "persistent", True),
    ("truncated", "transient", True),
    ("truncated", "persistent", True),
]


def read_env(path):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                out[k.replace("export ", "").strip()] = v.strip().strip("'\"")
    return out


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    if not lc_harness.fuse_usable():
        print("SKIP: /dev/fuse or fusermount3 not usable")
        return 77
    if not os.path.exists(sys.argv[2]):
        print("SKIP: no Swift env file %s (run with the ctest fixture 'swift')" % sys.argv[2])
        return 77
    s3 = read_env(sys.argv[2])
    h = lc_harness.Harness(sys.argv[1], "swift-faults", files=8, file_bytes=200000)
    mf.KEY = "swift-faults-%d" % os.getpid()
    failures = []
    try:
        endpoint = h.start_proxy(upstream=s3["S3_ENDPOINT"])
        for k in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "LAZYCACHE_STORE"):
            h.env.pop(k, None)
        # Everything goes through the proxy: the endpoint comes from the environment, so the
        # shared scenarios' `--store URL` stays the same for every store.
        h.env.update(AWS_ACCESS_KEY_ID=s3["S3_ACCESS_KEY"], AWS_SECRET_ACCESS_KEY=s3["S3_SECRET_KEY"],
                     AWS_REGION=s3.get("S3_REGION", "us-east-1"), AWS_ENDPOINT_URL=endpoint,
                     AWS_SHARED_CREDENTIALS_FILE=os.path.join(h.tmp, "none"), AWS_CONFIG_FILE=os.path.join(h.tmp, "none"))
        url = "s3://lazycache"
        h.lc("save", "--store", url, "--key", mf.KEY, "--frame-size", "64K", h.src, check=True)
        for name, mode, extract in CASES:
            mf.mount_scenario(h, url, name, FAULTS[name], mode, failures)
            if extract:
                mf.extract_scenario(h, url, name, FAULTS[name], mode, failures)
        print("the proxy forwarded %d requests to Swift" % h.proxy_count(), flush=True)
    finally:
        h.close()
    return lc_harness.report(failures)


if __name__ == "__main__":
    sys.exit(main())
