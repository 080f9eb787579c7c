#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Dead, zombie and impostor daemons are recognised as gone, and their leftovers cleaned.

Usage: stale_daemon_test.py LAZYCACHE

Cases (each on the same local-store entry, its own run directory state files):
  killed   mount, kill -9 the daemon (reaped by init): `status PATH` says stale, exits non-zero and
           cleans the mount point and the state file; a second kill, then `unmount --all` cleans;
           a third, then `mount` on the same path cleans and mounts.
  zombie   `mount --foreground` as a child of this test, kill -9 it and do NOT reap it (a container
           whose PID 1 never reaps): /proc shows Z; `status` (no path) and `unmount --all` must
           treat it as gone, and `mount` on the path must work.
  walk     a tree of 6,000 directories, mounted with the tree walk (on by default) and the daemon
           killed 0-200 ms after the mount returned, while its walk lists the tree: the daemon
           must die within 10 s and leave a stale mount point that the next mount cleans. (The
           walk ran on a thread of the daemon until session 37: a kill while its request to the
           daemon's own mount was being handled left that thread waiting on the dead process,
           unkillable, and the mount hung everything that touched it.)
  reused   state files naming a pid now used by another program (`sleep`), one with a wrong start
           time and one in the old format without one: `status` reports them stale and removes
           them, `unmount --all` exits 0, and the `sleep` gets no signal.
Skips (exit 77) when FUSE is not usable.
"""
import glob
import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lc_harness  # noqa: E402


def state_files(h):
    return sorted(glob.glob(os.path.join(h.run_dir, "mount-*.state")))


def expect(failures, cond, what):
    if not cond:
        failures.append(what)


def mount_and_kill(h, mnt, cache, failures, label):
    p = h.mount(h.store, mnt, cache, ["--prefetch", "none"])
    if p.returncode != 0:
        failures.append("%s: mount failed: %s" % (label, p.stderr.strip()))
        return None
    pid = h.daemon_pid(mnt)
    rel = sorted(h.files)[0]
    expect(failures, lc_harness.read_file(os.path.join(mnt, rel)) == h.files[rel], "%s: wrong bytes before the kill" % label)
    lc_harness.kill9(pid)
    expect(failures, lc_harness.is_stale(mnt), "%s: mount point not stale after kill -9" % label)
    return pid


def clean_after(h, mnt, failures, label):
    expect(failures, not lc_harness.is_stale(mnt) and not os.path.ismount(mnt),
           "%s: mount point still stale or mounted" % label)
    expect(failures, not state_files(h), "%s: state files left: %s" % (label, state_files(h)))


def killed_case(h, failures):
    mnt, cache = os.path.join(h.tmp, "mnt-killed"), os.path.join(h.tmp, "cache-killed")
    if mount_and_kill(h, mnt, cache, failures, "killed/status") is not None:
        s = h.lc("status", mnt)
        expect(failures, s.returncode != 0 and ": stale from" in s.stdout, "killed: status said %r (rc %d)" % (s.stdout, s.returncode))
        clean_after(h, mnt, failures, "killed: after status")
    if mount_and_kill(h, mnt, cache, failures, "killed/unmount") is not None:
        u = h.lc("unmount", "--all")
        expect(failures, u.returncode == 0, "killed: unmount --all failed: %s" % u.stderr.strip())
        clean_after(h, mnt, failures, "killed: after unmount --all")
    if mount_and_kill(h, mnt, cache, failures, "killed/mount") is not None:
        p = h.mount(h.store, mnt, cache, ["--prefetch", "none"])
        expect(failures, p.returncode == 0 and "cleaned up a stale mount" in p.stderr, "killed: remount: rc %d %s" % (p.returncode, p.stderr.strip()))
        rel = sorted(h.files)[-1]
        expect(failures, p.returncode == 0 and lc_harness.read_file(os.path.join(mnt, rel)) == h.files[rel],
               "killed: remount serves wrong bytes")
        expect(failures, len(state_files(h)) == 1, "killed: remount left %s" % state_files(h))
        h.unmount(mnt)
        clean_after(h, mnt, failures, "killed: after the final unmount")


def zombie_case(h, failures):
    mnt, cache = os.path.join(h.tmp, "mnt-zombie"), os.path.join(h.tmp, "cache-zombie")
    os.makedirs(mnt)
    h.mounts.append(mnt)
    child = subprocess.Popen([h.cli, "mount", "--foreground", "--store", h.store, "--any-paths", "--key", "faults", "--cache-dir", cache,
                              "--prefetch", "none", mnt], env=h.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pid = h.daemon_pid(mnt, wait_s=20)
        if pid != child.pid:
            failures.append("zombie: foreground daemon %s did not register (found %s)" % (child.pid, pid))
            return
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.time() + 10
        while time.time() < deadline and lc_harness.process_running(child.pid):
            time.sleep(0.01)
        with open("/proc/%d/stat" % child.pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        expect(failures, state == "Z", "zombie: the killed child is %r, not a zombie" % state)
        s = h.lc("status")
        expect(failures, s.returncode != 0 and ": stale from" in s.stdout, "zombie: status said %r (rc %d)" % (s.stdout, s.returncode))
        clean_after(h, mnt, failures, "zombie: after status")
        u = h.lc("unmount", "--all")
        expect(failures, u.returncode == 0, "zombie: unmount --all failed: %s" % u.stderr.strip())
        s = h.lc("status")
        expect(failures, "no lazycache mounts" in s.stdout, "zombie: status still lists %r" % s.stdout)
        p = h.mount(h.store, mnt, cache, ["--prefetch", "none"])
        expect(failures, p.returncode == 0, "zombie: remount failed: %s" % p.stderr.strip())
        s = h.lc("status", mnt)
        expect(failures, s.returncode == 0 and ": mounted from" in s.stdout, "zombie: new mount not reported: %r" % s.stdout)
        h.unmount(mnt)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


def abort_connection(connection, failures):
    """What docs/mount.md tells a user with a hung mount to do: abort its FUSE connection."""
    connections = "/sys/fs/fuse/connections"
    if not os.path.exists(os.path.join(connections, str(connection))):
        subprocess.run(["mount", "-t", "fusectl", "fusectl", connections], capture_output=True)
    try:
        with open(os.path.join(connections, str(connection), "abort"), "w") as f:
            f.write("1")
    except OSError as e:
        failures.append("cannot abort FUSE connection %d (%s): the mount stays hung" % (connection, e))


def walk_case(h, failures):
    src = os.path.join(h.tmp, "src-walk")
    for i in range(3000):
        d = os.path.join(src, "d%04d" % i)
        os.makedirs(os.path.join(d, "e"))
        with open(os.path.join(d, "f"), "w") as f:
            f.write("%d\n" % i)
    h.lc("save", "--store", h.store, "--key", "walk", src, check=True)
    mnt, cache = os.path.join(h.tmp, "mnt-walk"), os.path.join(h.tmp, "cache-walk")
    for delay in (0, 0.005, 0.02, 0.05, 0.1, 0.2):
        label = "walk, killed %g s after the mount" % delay
        p = h.mount(h.store, mnt, cache, ["--prefetch", "none"], key="walk")
        if p.returncode != 0:
            failures.append("%s: mount failed: %s" % (label, p.stderr.strip()))
            return
        pid = h.daemon_pid(mnt)
        connection = os.minor(os.stat(mnt).st_dev)  # /sys/fs/fuse/connections/N
        time.sleep(delay)
        lc_harness.kill9(pid)
        if lc_harness.process_running(pid):
            failures.append("%s: the daemon is still alive 10 s after SIGKILL (its walk waits on its own mount?)" % label)
            abort_connection(connection, failures)  # so the test ends instead of hanging on the mount point
            lc_harness.kill9(pid)
            break
        expect(failures, lc_harness.is_stale(mnt), "%s: mount point not stale after the daemon died" % label)
    u = h.lc("unmount", "--all")
    expect(failures, u.returncode == 0, "walk: unmount --all failed: %s" % u.stderr.strip())
    clean_after(h, mnt, failures, "walk: after unmount --all")


def reused_case(h, failures):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        with open("/proc/%d/stat" % sleeper.pid) as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19])
        mnt = os.path.join(h.tmp, "mnt-reused")
        os.makedirs(mnt)
        for name, start_line in (("mount-%d.state" % sleeper.pid, "start=%d\n" % (start + 1)), ("mount-999999.state", "")):
            text = "pid=%d\n%sseq=1\nstate=running\narchive=x\nkey=k\nmountpoint=%s\n" % (sleeper.pid, start_line, mnt)
            with open(os.path.join(h.run_dir, name), "w") as f:
                f.write(text)
        s = h.lc("status")
        expect(failures, s.returncode != 0 and s.stdout.count(": stale from") == 2,
               "reused: status said %r (rc %d)" % (s.stdout, s.returncode))
        expect(failures, not state_files(h), "reused: status left %s" % state_files(h))
        with open(os.path.join(h.run_dir, "mount-%d.state" % sleeper.pid), "w") as f:
            f.write("pid=%d\nstart=%d\nseq=1\nstate=running\nmountpoint=%s\n" % (sleeper.pid, start + 1, mnt))
        u = h.lc("unmount", "--all")
        expect(failures, u.returncode == 0, "reused: unmount --all failed: %s" % u.stderr.strip())
        expect(failures, not state_files(h), "reused: unmount --all left %s" % state_files(h))
        expect(failures, sleeper.poll() is None, "reused: the unrelated process was signalled (exit %s)" % sleeper.poll())
    finally:
        sleeper.kill()
        sleeper.wait()


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    if not lc_harness.fuse_usable():
        print("SKIP: /dev/fuse or fusermount3 not usable")
        return 77
    h = lc_harness.Harness(sys.argv[1], "stale", files=4, file_bytes=100000)
    failures = []
    try:
        h.save()
        for case in (killed_case, zombie_case, walk_case, reused_case):
            before = len(failures)
            case(h, failures)
            print("%s: %s" % (case.__name__, "ok" if len(failures) == before else "FAILED"), flush=True)
    finally:
        h.close()
    return lc_harness.report(failures)


if __name__ == "__main__":
    sys.exit(main())
