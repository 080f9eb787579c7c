#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Credentials that expire mid-mount recover without a remount.

Usage: credentials_expiry_test.py LAZYCACHE

An entry is served over the S3 API (path style) by the fault proxy; the mount reads credentials
from a shared credentials file (AWS_SHARED_CREDENTIALS_FILE). After the mount is up the proxy
answers 403 ExpiredToken to every request not signed with the new access key id AKIDNEW (the
old credentials "expired"): reads must fail quickly (no hang, no wrong bytes). Then the
credentials file is replaced by one holding AKIDNEW: the same daemon, without a remount, must
re-read it and serve every file. The proxy's log shows which key signed what.
Skips (exit 77) when FUSE is not usable.
"""
import os
import re
import shutil
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lc_harness  # noqa: E402

DEADLINE_S = 20


def write_credentials(path, akid):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("[default]\naws_access_key_id = %s\naws_secret_access_key = secret-%s\n" % (akid, akid))
    os.rename(tmp, path)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    if not lc_harness.fuse_usable():
        print("SKIP: /dev/fuse or fusermount3 not usable")
        return 77
    h = lc_harness.Harness(sys.argv[1], "creds", files=6, file_bytes=200000)
    failures = []
    creds = os.path.join(h.tmp, "credentials")
    write_credentials(creds, "AKIDOLD")
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        h.env.pop(k, None)
    h.env.update(AWS_SHARED_CREDENTIALS_FILE=creds, AWS_CONFIG_FILE=os.path.join(h.tmp, "none"), AWS_REGION="us-east-1")
    mnt = os.path.join(h.tmp, "mnt")
    try:
        h.save()
        # The S3 layout: bucket "bkt" is a directory of the proxy's origin.
        os.makedirs(os.path.join(h.store, "bkt"))
        for name in os.listdir(h.store):
            if name.endswith(".tar.zst"):
                shutil.copy(os.path.join(h.store, name), os.path.join(h.store, "bkt", name))
        endpoint = h.start_proxy()
        p = h.lc("mount", "--store", "s3://bkt", "--endpoint", endpoint, "--path-style", "--any-paths", "--key", "faults",
                 "--cache-dir", os.path.join(h.tmp, "cache"), "--read-timeout", "5", "--retries", "2",
                 "--prefetch", "none", mnt, timeout=60)
        h.mounts.append(mnt)
        if p.returncode != 0:
            failures.append("mount over S3 failed: %s" % p.stderr.strip())
            return 1
        h.plan([{"requests": [h.proxy_count() + 1, None], "fault": "expire", "unless_key": "AKIDNEW"}])
        reader = lc_harness.TimedReader()
        names = sorted(h.files)
        expired = []
        for rel in names[:3]:
            status, data, took = reader.read(os.path.join(mnt, rel), DEADLINE_S)
            if status == "hang":
                failures.append("read of %s hung with expired credentials" % rel)
            elif status == "ok":
                failures.append("read of %s succeeded although every request got 403" % rel)
            else:
                expired.append(status)
        print("with expired credentials: %s" % expired, flush=True)
        write_credentials(creds, "AKIDNEW")
        for rel in names:
            status, data, took = reader.read(os.path.join(mnt, rel), DEADLINE_S)
            if status != "ok" or data != h.files[rel]:
                failures.append("after new credentials appeared, %s gave %s" % (rel, status))
        reader.close()
        log = lc_harness.json.loads(h.proxy("GET", "log"))["log"]
        keys = set()
        for e in log:
            keys.add(e["status"])
        print("proxy statuses seen: %s" % sorted(keys), flush=True)
        u = h.unmount(mnt)
        if u.returncode != 0:
            failures.append("unmount failed: %s" % u.stderr.strip())
        # Credentials never reach the output.
        for text in (p.stdout, p.stderr, u.stdout, u.stderr):
            if re.search("secret-AKID", text):
                failures.append("a secret key was printed")
    finally:
        h.close()
    return lc_harness.report(failures)


if __name__ == "__main__":
    sys.exit(main())
