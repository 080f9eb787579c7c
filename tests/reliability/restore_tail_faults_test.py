#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""restore --extract of an exact key when the lookup's tail read is damaged on the way.

Usage: restore_tail_faults_test.py LAZYCACHE

For an exact key (the saved paths given), the lookup reads the entry's last MiB instead of a HEAD
and the archive is opened from those bytes (tools/cmd_restore.cpp, open_for_extract). The fault
proxy flips bits in that one read (the first data GET) and nowhere else, so a correct restore
must not trust it beyond the index: the frames the tail held are read again from the store (a
frame served from the flipped copy would fail its digest twice, as the re-read got the same
bytes), and a tail whose index does not parse is read again before the entry is called corrupt.
Each case: exit 0 and a tree identical to the saved one. The same flip in every GET (other bits
each time): a non-zero exit with a message, or exit 0 with every file as saved (each frame is
checked on its own and used from whichever read of its part brought it in good, so damage that
moves between reads can be absorbed), and never a file with wrong bytes.
`mount` of the same exact key opens from its lookup's tail too (tools/cmd_mount.cpp): a tail whose
index does not parse is read again before the mount fails, so with the flip in the lookup's read
only, the mount serves the saved tree byte for byte. Mount cases are skipped without FUSE.
"""
import os
import random
import shutil
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lc_harness  # noqa: E402

KEY = "tail"


def index_heavy_tree(h):
    """2,000 small files: the index is most of the archive, so flipped bits land in it."""
    rng = random.Random(3)
    for i in range(2000):
        rel = "d%02d/f%04d.txt" % (i % 40, i)
        data = rng.randbytes(rng.randrange(0, 64))
        os.makedirs(os.path.dirname(os.path.join(h.src, rel)), exist_ok=True)
        with open(os.path.join(h.src, rel), "wb") as f:
            f.write(data)
        h.files[rel] = data


def restore_case(h, url, label, rule, expect_ok, failures):
    shutil.rmtree(h.src, ignore_errors=True)
    h.plan([dict({"method": "GET", "path": ".tar.zst", "requests": [h.proxy_count() + 1, None]}, **rule)] if rule else [])
    # The saved path, so the key is exact and the lookup reads the tail (no --any-paths).
    p = h.lc("restore", "--extract", "--store", url, "--key", KEY, "--retries", "3", h.src, timeout=120)
    h.plan([])
    wrong = [rel for rel, want in h.files.items()
             if os.path.exists(os.path.join(h.src, rel)) and lc_harness.read_file(os.path.join(h.src, rel)) != want]
    if wrong:
        failures.append("%s: WRONG BYTES in %s" % (label, wrong[:5]))
    if expect_ok:
        if p.returncode != 0:
            failures.append("%s: the damaged tail read was not absorbed (exit %d): %s" % (label, p.returncode, p.stderr.strip()))
        else:
            missing = [rel for rel in h.files if not os.path.exists(os.path.join(h.src, rel))]
            if missing:
                failures.append("%s: exit 0 but missing %s" % (label, missing[:5]))
    elif p.returncode == 0:
        missing = [rel for rel in h.files if not os.path.exists(os.path.join(h.src, rel))]
        if missing:
            failures.append("%s: exit 0 although every read was damaged, and missing %s" % (label, missing[:5]))
    elif not p.stderr.strip():
        failures.append("%s: failed without a message" % label)
    print("%-40s exit %d %s" % (label, p.returncode, p.stderr.strip().splitlines()[-1:] if p.returncode else ""), flush=True)


def mount_case(h, url, label, rule, failures):
    """Mounts the exact key at the saved path with `rule` on the lookup's read; every file must
    read back as saved, then unmount."""
    shutil.rmtree(h.src, ignore_errors=True)
    os.makedirs(h.src)
    h.plan([dict({"method": "GET", "path": ".tar.zst", "requests": [h.proxy_count() + 1, None]}, **rule)] if rule else [])
    h.mounts.append(h.src)
    p = h.lc("mount", "--store", url, "--key", KEY, "--cache-dir", os.path.join(h.tmp, "mount-cache"), h.src, timeout=60)
    h.plan([])
    if p.returncode != 0:
        failures.append("%s: the damaged tail read was not absorbed (exit %d): %s" % (label, p.returncode, p.stderr.strip()))
    else:
        wrong = [rel for rel, want in h.files.items() if lc_harness.read_file(os.path.join(h.src, rel)) != want]
        if wrong:
            failures.append("%s: WRONG BYTES through the mount in %s" % (label, wrong[:5]))
        h.unmount(h.src)
    print("%-40s exit %d %s" % (label, p.returncode, p.stderr.strip().splitlines()[-1:] if p.returncode else ""), flush=True)


def run(cli, name, make_tree, bits, failures):
    h = lc_harness.Harness(cli, name, files=0 if make_tree else 16)
    try:
        if make_tree:
            make_tree(h)
        h.save(key=KEY)
        url = h.start_proxy()
        flip = {"fault": "flip", "bits": bits}
        restore_case(h, url, name + ": the lookup's tail only", dict(flip, matches=[1, 1]), True, failures)
        restore_case(h, url, name + ": every read", flip, False, failures)
        # Undamaged: the same restore, for comparison.
        restore_case(h, url, name + ": no fault", None, True, failures)
        if lc_harness.fuse_usable():
            mount_case(h, url, name + ": mount, the lookup's tail only", dict(flip, matches=[1, 1]), failures)
    finally:
        h.close()


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    failures = []
    # 16 files of ~300 KB in 64 KiB frames: the last MiB is mostly frame data, so the flips land
    # in frames the tail held.
    run(sys.argv[1], "restore-tail-frames", None, 2, failures)
    # Many flips in an index-heavy tail: the index itself is hit.
    run(sys.argv[1], "restore-tail-index", index_heavy_tree, 64, failures)
    return lc_harness.report(failures)


if __name__ == "__main__":
    sys.exit(main())
