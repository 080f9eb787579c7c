#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A damaged chunk cache index (issue 13): mounts and `cache` subcommands work, with one warning.

Usage: cache_damage_test.py LAZYCACHE

A mount fills a chunk cache from a local store. For each kind of damage to a copy of its
index.mdb (two flipped bytes in every live leaf page, zeroed, truncated to half, both meta pages
damaged), in turn:
  mount     a mount on the damaged copy reads every file correctly; its output says once that
            the index was damaged and set aside; `cache stats`, `cache gc` and `cache clear`
            then exit 0 without a further warning.
  commands  on fresh damaged copies, `cache clear`, `cache gc` and `cache stats` each exit 0
            first, with the one warning.
Before issue 13 the flipped bytes crashed the daemon and `cache gc` (SIGSEGV in liblmdb) and the
other kinds failed every mount and command with MDB_INVALID. Skips (exit 77) without FUSE.
"""
import os
import shutil
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lc_harness  # noqa: E402

PAGE = 4096
LEAF = 0x02  # LMDB's P_LEAF page flag
WARNING = "index.mdb is damaged"


def damage(index, kind):
    with open(index, "rb") as f:
        b = bytearray(f.read())
    if kind == "flipped":
        flipped = 0
        for page in range(2, len(b) // PAGE):
            flags = int.from_bytes(b[page * PAGE + 10:page * PAGE + 12], "little")
            if flags & LEAF:
                b[page * PAGE + 16] ^= 0x5A
                b[page * PAGE + 17] ^= 0x37
                flipped += 1
        assert flipped >= 2, "expected leaf pages to damage, found %d" % flipped
    elif kind == "zeroed":
        b = bytearray(len(b))
    elif kind == "truncated":
        b = b[: len(b) // 2]
    elif kind == "meta":
        for i in range(16, 48):
            b[i] = b[PAGE + i] = 0x55
    with open(index, "r+b") as f:  # in place, as damage on disk would be
        f.truncate(0)
        f.write(b)


def warnings(text):
    return [line for line in text.splitlines() if WARNING in line]


def daemon_log(h, pid):
    try:
        with open(os.path.join(h.run_dir, "mount-%d.log" % pid)) as f:
            return f.read()
    except (OSError, TypeError):
        return ""


def command(h, cache, action, failures, label, want_warnings):
    p = h.lc("cache", action, "--cache-dir", cache, timeout=60)
    if p.returncode != 0:
        failures.append("%s: cache %s exit %d: %s" % (label, action, p.returncode, p.stderr.strip()))
    elif len(warnings(p.stderr)) != want_warnings:
        failures.append("%s: cache %s: expected %d warning(s), stderr %r" % (label, action, want_warnings, p.stderr))


def mount_and_read(h, cache, label, failures):
    """Mounts with `cache`, reads every file, unmounts; the mount's output and daemon log."""
    mnt = os.path.join(h.tmp, "mnt-" + label)
    p = h.mount(h.store, mnt, cache, ["--read-only", "--prefetch", "none"], key="damage")
    if p.returncode != 0:
        failures.append("%s: mount exit %d: %s" % (label, p.returncode, p.stderr.strip()))
        return p.stdout + p.stderr
    pid = h.daemon_pid(mnt)
    for rel, want in sorted(h.files.items()):
        try:
            if lc_harness.read_file(os.path.join(mnt, rel)) != want:
                failures.append("%s: wrong bytes from %s" % (label, rel))
        except OSError as e:
            failures.append("%s: reading %s failed: %s" % (label, rel, e))
    u = h.unmount(mnt)
    if u.returncode != 0:
        failures.append("%s: unmount exit %d: %s" % (label, u.returncode, u.stderr.strip()))
    return p.stdout + p.stderr + daemon_log(h, pid)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    if not lc_harness.fuse_usable():
        print("SKIP: /dev/fuse or fusermount3 not usable")
        return 77
    h = lc_harness.Harness(sys.argv[1], "cache-damage", files=8, file_bytes=150000)
    failures = []
    try:
        h.save(key="damage")
        pristine = os.path.join(h.tmp, "cache-pristine")
        out = mount_and_read(h, pristine, "fill", failures)
        if warnings(out):
            failures.append("fill: a fresh cache warned: %r" % warnings(out))
        for kind in ("flipped", "zeroed", "truncated", "meta"):
            cache = os.path.join(h.tmp, "cache-" + kind)
            shutil.copytree(pristine, cache)
            damage(os.path.join(cache, "index.mdb"), kind)
            out = mount_and_read(h, cache, kind, failures)
            if len(warnings(out)) != 1:
                failures.append("%s: mount: expected one warning, got %r" % (kind, warnings(out)))
            for action in ("stats", "gc", "clear"):
                command(h, cache, action, failures, kind, 0)
            if not os.path.exists(os.path.join(cache, "index.mdb.damaged")):
                failures.append("%s: the damaged index was not kept as index.mdb.damaged" % kind)
            for action in ("clear", "gc", "stats"):
                first = os.path.join(h.tmp, "cache-%s-%s" % (kind, action))
                shutil.copytree(pristine, first)
                damage(os.path.join(first, "index.mdb"), kind)
                command(h, first, action, failures, "%s/%s first" % (kind, action), 1)
            print("%-9s done, %d failures so far" % (kind, len(failures)), flush=True)
    finally:
        h.close()
    return lc_harness.report(failures)


if __name__ == "__main__":
    sys.exit(main())
