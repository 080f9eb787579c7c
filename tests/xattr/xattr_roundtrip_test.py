#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`pack --xattrs` round trip: user.* extended attributes survive extract and show in a mount.

Usage: xattr_roundtrip_test.py LAZYCACHE

A tree with user.* attributes on files and directories (text, binary with NUL and high bytes,
empty, 4000-byte values, a hardlinked file) is packed with --xattrs; `extract -C` must restore
exactly the same names and values, and a read-only `mount --archive` must answer getxattr and
listxattr the same way (ENODATA for a missing name). Packed without --xattrs nothing comes back.
The work directory is made under the current directory (CTest's build tree, not /tmp, which may
be a tmpfs without user xattrs); skips (exit 77) only when that file system refuses user.*
attributes. The mount part is skipped, with a message, when FUSE is not usable.
"""
import errno
import os
import shutil
import subprocess
import sys
import tempfile
import time

ATTRS = {
    "file.txt": {"user.text": b"hello", "user.binary": bytes([0, 1, 2, 255, 0, 10]), "user.empty": b""},
    "dir": {"user.dir": b"directory attribute"},
    "dir/nested.bin": {"user.big": bytes(range(256)) * 15 + b"end", "user.k": b"v"},
    "plain.txt": {},
    "dir/hard": {"user.text": b"hello", "user.binary": bytes([0, 1, 2, 255, 0, 10]), "user.empty": b""},
}


def user_xattrs(path):
    return {n: os.getxattr(path, n, follow_symlinks=False) for n in os.listxattr(path, follow_symlinks=False) if n.startswith("user.")}


def check_tree(root, want_attrs, failures, label):
    for rel, attrs in ATTRS.items():
        try:
            got = user_xattrs(os.path.join(root, rel))
        except OSError as e:
            failures.append("%s: %s: %s" % (label, rel, e))
            continue
        want = attrs if want_attrs else {}
        if got != want:
            failures.append("%s: %s has %r, want %r" % (label, rel, got, want))
    try:
        os.getxattr(os.path.join(root, "file.txt"), "user.missing")
        failures.append("%s: getxattr of a missing name succeeded" % label)
    except OSError as e:
        if e.errno != errno.ENODATA:
            failures.append("%s: getxattr of a missing name gave %s, not ENODATA" % (label, errno.errorcode.get(e.errno)))


def fuse_usable():
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
        return shutil.which("fusermount3") is not None
    except OSError:
        return False


def run(cli, env, *args, timeout=60, cwd=None):
    return subprocess.run([cli] + list(args), env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    cli = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="lc-xattr-", dir=os.environ.get("LC_XATTR_DIR", os.getcwd()))
    env = dict(os.environ, LAZYCACHE_RUN_DIR=os.path.join(tmp, "run"))
    mnt = os.path.join(tmp, "mnt")
    failures = []
    try:
        src = os.path.join(tmp, "src")
        os.makedirs(os.path.join(src, "dir"))
        for rel in ("file.txt", "dir/nested.bin", "plain.txt"):
            with open(os.path.join(src, rel), "wb") as f:
                f.write(("content of %s\n" % rel).encode())
        os.link(os.path.join(src, "file.txt"), os.path.join(src, "dir/hard"))
        try:
            for rel, attrs in ATTRS.items():
                for n, v in attrs.items():
                    os.setxattr(os.path.join(src, rel), n, v, follow_symlinks=False)
        except OSError as e:
            if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
                print("SKIP: the file system under %s does not support user.* xattrs" % tmp)
                return 77
            raise
        with_x, without_x = os.path.join(tmp, "with.tar.zst"), os.path.join(tmp, "without.tar.zst")
        for out, extra in ((with_x, ["--xattrs"]), (without_x, [])):
            p = run(cli, env, "pack", *extra, "-o", out, "src", cwd=tmp)
            if p.returncode != 0:
                failures.append("pack %s failed: %s" % (extra, p.stderr.strip()))
                return 1
        for archive, want, label in ((with_x, True, "extract --xattrs archive"), (without_x, False, "extract plain archive")):
            dest = os.path.join(tmp, "out-" + os.path.basename(archive))
            os.makedirs(dest)
            p = run(cli, env, "extract", "-C", dest, archive)
            if p.returncode != 0:
                failures.append("%s failed: %s" % (label, p.stderr.strip()))
                continue
            # Packed as the relative path "src": the tree sits under src/.
            check_tree(os.path.join(dest, "src"), want, failures, label)
        if not fuse_usable():
            print("mount part skipped: /dev/fuse or fusermount3 not usable")
        else:
            os.makedirs(mnt)
            p = run(cli, env, "mount", "--archive", with_x, "--read-only", "--cache-dir", os.path.join(tmp, "cache"), mnt)
            if p.returncode != 0:
                failures.append("mount failed: %s" % p.stderr.strip())
            else:
                # A single root is mounted as the mount point itself.
                check_tree(mnt, True, failures, "mount")
                names = os.listxattr(os.path.join(mnt, "file.txt"))
                if sorted(n for n in names if n.startswith("user.")) != sorted(ATTRS["file.txt"]):
                    failures.append("mount: listxattr gave %r" % names)
    finally:
        if os.path.ismount(mnt):
            u = run(cli, env, "unmount", mnt)
            if os.path.ismount(mnt):
                subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True)
                failures.append("unmount failed: %s" % u.stderr.strip())
            time.sleep(0.1)
        if not os.environ.get("LC_KEEP_TEST_DIRS"):
            shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAIL: " + f)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
