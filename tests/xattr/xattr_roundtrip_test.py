#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`pack --xattrs` round trip: user.* extended attributes survive extract and show in a mount.

Usage: xattr_roundtrip_test.py LAZYCACHE

A tree with user.* attributes on files and directories (text, binary with NUL and high bytes,
empty, 4000-byte values, a hardlinked file) is packed with --xattrs; `extract -C` must restore
exactly the same names and values, and a read-only `mount --archive` must answer getxattr and
listxattr the same way (ENODATA for a missing name). Packed without --xattrs nothing comes back,
and a read-only mount of that archive tells the kernel it has no attributes at all: getxattr
fails with EOPNOTSUPP and only the first one reaches the daemon (requests_xattr), listxattr gives
an empty list. Then the recipe docs/mount.md gives for writes at kernel speed: a kernel overlayfs
over that read-only mount reads every file right, sends the daemon no getxattr per entry, and
takes a write in its upper directory without changing the mount (skipped, with a message, where
an overlay cannot be mounted).
The work directory is made under the current directory (CTest's build tree, not /tmp, which may
be a tmpfs without user xattrs); skips (exit 77) only when that file system refuses user.*
attributes. The mount part is skipped, with a message, when FUSE is not usable.
"""
import errno
import json
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


def status_number(cli, env, path, name):
    p = run(cli, env, "status", "--json", path)
    try:
        return json.loads(p.stdout.splitlines()[0])["stats"][name]
    except (ValueError, KeyError, IndexError):
        return None


def no_xattrs_case(cli, env, tmp, archive, failures):
    """A read-only mount of an archive without attributes, alone and under a kernel overlayfs."""
    lower = os.path.join(tmp, "lower")
    os.makedirs(lower)
    p = run(cli, env, "mount", "--archive", archive, "--read-only", "--cache-dir", os.path.join(tmp, "cache"), lower)
    if p.returncode != 0:
        failures.append("mount of the plain archive failed: %s" % p.stderr.strip())
        return
    try:
        for rel in ATTRS:
            path = os.path.join(lower, rel)
            for name in ("user.text", "security.capability", "trusted.overlay.opaque"):
                try:
                    os.getxattr(path, name)
                    failures.append("no-xattrs mount: getxattr %s %s succeeded" % (rel, name))
                except OSError as e:
                    if e.errno != errno.EOPNOTSUPP:
                        failures.append("no-xattrs mount: getxattr %s %s: %s, not EOPNOTSUPP" % (rel, name, e))
            if os.listxattr(path) != []:
                failures.append("no-xattrs mount: listxattr %s gave %r" % (rel, os.listxattr(path)))
        lists = len(ATTRS)
        asked = status_number(cli, env, lower, "requests_xattr")
        if asked != 1 + lists:
            failures.append("no-xattrs mount: %s xattr requests for %d getxattr and %d listxattr calls (want 1 + %d)"
                            % (asked, 3 * len(ATTRS), lists, lists))
        merged, upper, work = (os.path.join(tmp, d) for d in ("merged", "upper", "work"))
        for d in (merged, upper, work):
            os.makedirs(d)
        o = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", "lowerdir=%s,upperdir=%s,workdir=%s" % (lower, upper, work), merged],
                           capture_output=True, text=True)
        if o.returncode != 0:
            print("overlay part skipped: %s" % o.stderr.strip())
            return
        try:
            before = status_number(cli, env, lower, "requests_xattr")
            for rel in (r for r in ATTRS if r != "dir"):
                with open(os.path.join(merged, rel), "rb") as f:
                    want = ("content of %s\n" % ("file.txt" if rel == "dir/hard" else rel)).encode()
                    if f.read() != want:
                        failures.append("overlay: %s reads wrong bytes" % rel)
            with open(os.path.join(merged, "plain.txt"), "ab") as f:
                f.write(b"more\n")
            with open(os.path.join(merged, "plain.txt"), "rb") as f:
                if f.read() != b"content of plain.txt\nmore\n":
                    failures.append("overlay: the write does not read back")
            with open(os.path.join(lower, "plain.txt"), "rb") as f:
                if f.read() != b"content of plain.txt\n":
                    failures.append("overlay: the write changed the read-only mount")
            if not os.path.exists(os.path.join(upper, "plain.txt")):
                failures.append("overlay: the changed file is not in the upper directory")
            after = status_number(cli, env, lower, "requests_xattr")
            # The copy-up of plain.txt lists its attributes (one listxattr); no getxattr per entry.
            if before is None or after is None or after - before > 2:
                failures.append("overlay: %s -> %s xattr requests for a read of %d entries and one copy-up" % (before, after, len(ATTRS)))
        finally:
            subprocess.run(["umount", merged], capture_output=True)
    finally:
        u = run(cli, env, "unmount", lower)
        if u.returncode != 0:
            failures.append("unmount of the plain archive failed: %s" % u.stderr.strip())


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
                u = run(cli, env, "unmount", mnt)
                if u.returncode != 0:
                    failures.append("unmount failed: %s" % u.stderr.strip())
            no_xattrs_case(cli, env, tmp, without_x, failures)
    finally:
        for m in (os.path.join(tmp, "merged"), os.path.join(tmp, "lower")):
            if os.path.ismount(m) and subprocess.run(["umount", m], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", m], capture_output=True)
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
