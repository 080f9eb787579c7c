#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""No password or presigned signature in anything lazycache prints or stores, and private files.

Usage: secrets_test.py LAZYCACHE

An entry is served over plain HTTP with Range by the fault proxy; it is mounted from a store URL
carrying a password (http://user:pass@host/...) and a presigned-style query (AWS SigV4
signature, credential and security token, Azure SAS sig). Then none of the secrets may appear
in: mount's stdout and stderr, `status`, `status --json`, the daemon log, the state file, the
save record, any other run-directory file, or the daemon's /proc/PID/cmdline. After the mount is
up the proxy answers 500 with an S3 error whose Code and Message hold ESC and newlines: the
daemon log must show them quoted (no raw control byte, no line drawn by the server). The run
directory must be 0700 and every file in it 0600. Skips (exit 77) when FUSE is not usable.
"""
import glob
import json
import os
import stat
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lc_harness  # noqa: E402

SECRETS = ["Pa55-s3cret", "AKIASECRETKEYID", "SIGNATURE0123abcdef", "SESSIONTOKENsecret", "AZURESASsig"]


def leaks(text):
    return [s for s in SECRETS if s in text]


def daemon_proc_file(h, mnt, name):
    """/proc/PID/<name> of the daemon serving mnt, as text."""
    pid = h.daemon_pid(mnt)
    if pid is None:
        raise AssertionError("no daemon serves %s" % mnt)
    with open("/proc/%d/%s" % (pid, name), "rb") as f:
        return f.read().decode(errors="replace")


def main():
    code = lc_harness.cannot_run(__doc__)
    if code is not None:
        return code
    h = lc_harness.Harness(sys.argv[1], "secrets", files=6, file_bytes=100000)
    failures = []
    mnt = os.path.join(h.tmp, "mnt")

    def check(what, text):
        found = leaks(text)
        if found:
            failures.append("%s holds %s: %r" % (what, found, text[:2000]))

    try:
        h.save(key="sec")
        # The entry save wrote (KEY!VERSION.tar.zst), not the harness's unversioned copy of it.
        entry = [n for n in os.listdir(h.store) if n.endswith(".tar.zst") and "!" in n]
        if len(entry) != 1:
            raise AssertionError("expected one entry in the store, found %r" % entry)
        base = h.start_proxy()
        url = (base.replace("http://", "http://lcuser:Pa55-s3cret@") + "/" + entry[0] +
               "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIASECRETKEYID%2F20260101%2Fus-east-1%2Fs3"
               "&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-Security-Token=SESSIONTOKENsecret"
               "&X-Amz-Signature=SIGNATURE0123abcdef&sig=AZURESASsig")
        os.makedirs(mnt)
        h.mounts.append(mnt)
        p = h.lc("mount", "--store", url, "--key", "sec", "--cache-dir", os.path.join(h.tmp, "cache"),
                 "--prefetch", "none", "--retries", "1", "--read-timeout", "5", mnt, timeout=60)
        if p.returncode != 0:
            raise AssertionError("mount failed (%d): %s" % (p.returncode, p.stderr))
        check("mount's stdout", p.stdout)
        check("mount's stderr", p.stderr)
        if "127.0.0.1" not in p.stdout:
            failures.append("mount's stdout does not say where the entry came from: %r" % p.stdout)
        # One file read through the mount: the bytes are right, the URL worked.
        if lc_harness.read_file(os.path.join(mnt, "f00.bin")) != h.files["f00.bin"]:
            failures.append("f00.bin read wrong bytes through the mount")
        cmdline = daemon_proc_file(h, mnt, "cmdline")
        check("the daemon's /proc/PID/cmdline", cmdline)
        if "127.0.0.1" not in cmdline:
            failures.append("the daemon's command line lost the host too: %r" % cmdline)
        for args in (["status"], ["status", "--json"]):
            s = h.lc(*args)
            check(" ".join(args), s.stdout + s.stderr)
        json.loads(h.lc("status", "--json").stdout.splitlines()[0])

        # The store fails with a hostile error body: the daemon logs it quoted, without secrets.
        h.plan([{"method": "GET", "fault": "status", "code": 500,
                 "s3_code": "Internal\u001b[2JError\nlazycache: FAKE server line"}])
        try:
            lc_harness.read_file(os.path.join(mnt, "sub", "f05.bin"))
            failures.append("a read succeeded while the store answered 500")
        except OSError:
            pass
        h.proxy("POST", "clear")
        h.lc("status")  # SIGUSR1: the daemon writes its state and access list now

        run = h.run_dir
        mode = stat.S_IMODE(os.stat(run).st_mode)
        if mode != 0o700:
            failures.append("run directory %s has mode %o, not 700" % (run, mode))
        names = sorted(os.listdir(run))
        for kind in (".log", ".state", ".info"):
            if not any(n.endswith(kind) for n in names):
                failures.append("no %s file in the run directory: %r" % (kind, names))
        for name in names:
            path = os.path.join(run, name)
            mode = stat.S_IMODE(os.stat(path).st_mode)
            if mode != 0o600:
                failures.append("%s has mode %o, not 600" % (name, mode))
            with open(path, "rb") as f:
                text = f.read().decode(errors="replace")
            check(name, text)
            if name.endswith(".log"):
                if "\x1b" in text:
                    failures.append("the daemon log holds a raw ESC: %r" % text)
                if any(line.startswith("lazycache: FAKE") for line in text.splitlines()):
                    failures.append("the server's reply drew a line in the daemon log: %r" % text)
                if "\\x1b[2J" not in text:
                    failures.append("the daemon log does not show the server's error, quoted: %r" % text)
        u = h.unmount(mnt)
        check("unmount's output", u.stdout + u.stderr)
        for path in glob.glob(os.path.join(run, "*")):
            mode = stat.S_IMODE(os.stat(path).st_mode)
            if mode != 0o600:
                failures.append("%s has mode %o after unmount, not 600" % (os.path.basename(path), mode))
            with open(path, "rb") as f:
                check(os.path.basename(path) + " after unmount", f.read().decode(errors="replace"))

        # The same URL from $LAZYCACHE_STORE: the daemon's environment shows it redacted, so
        # does the save record (where mount makes the environment's URL explicit).
        mnt2 = os.path.join(h.tmp, "mnt2")
        os.makedirs(mnt2)
        h.mounts.append(mnt2)
        h.env["LAZYCACHE_STORE"] = url
        p = h.lc("mount", "--key", "sec", "--cache-dir", os.path.join(h.tmp, "cache"), "--prefetch", "none", mnt2)
        del h.env["LAZYCACHE_STORE"]
        if p.returncode != 0:
            raise AssertionError("mount from $LAZYCACHE_STORE failed (%d): %s" % (p.returncode, p.stderr))
        check("mount's output (store from the environment)", p.stdout + p.stderr)
        environ = daemon_proc_file(h, mnt2, "environ")
        check("the daemon's /proc/PID/environ", environ)
        if "LAZYCACHE_STORE=http://***@127.0.0.1" not in environ:
            failures.append("the daemon's environment lost the redacted store URL: %r" % environ[:500])
        for path in glob.glob(os.path.join(run, "save-*mnt2.info")):
            with open(path) as f:
                check("the save record (store from the environment)", f.read())
        h.unmount(mnt2)
    except AssertionError as e:
        failures.append(str(e))
    finally:
        h.close()
    return lc_harness.report(failures)


if __name__ == "__main__":
    sys.exit(main())
