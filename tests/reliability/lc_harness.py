# SPDX-License-Identifier: MIT
"""Shared helpers for the reliability integration tests (Python stdlib only).

A Harness owns one temporary directory: a seeded source tree, a local store the CLI saves into,
the fault proxy serving that store over HTTP, mount points and chunk caches. Everything it starts
it stops by PID, and every mount it makes is unmounted in close(), even after a failure.
"""
import concurrent.futures
import errno
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PROXY = os.path.join(HERE, "..", "tools", "fault_proxy.py")


def fuse_usable():
    try:
        fd = os.open("/dev/fuse", os.O_RDWR)
        os.close(fd)
        return shutil.which("fusermount3") is not None
    except OSError:
        return False


def cannot_run(doc):
    """The exit code of a FUSE test that cannot run (no LAZYCACHE argument: 2 after printing its
    usage; FUSE unusable: 77, skipped), else None."""
    if len(sys.argv) < 2:
        print(doc)
        return 2
    if not fuse_usable():
        print("SKIP: /dev/fuse or fusermount3 not usable")
        return 77
    return None


class Harness:
    def __init__(self, cli, name, files=16, file_bytes=300000, seed=7):
        self.cli = os.path.abspath(cli)
        self.tmp = tempfile.mkdtemp(prefix="lc-%s-" % name)
        self.run_dir = os.path.join(self.tmp, "run")
        os.makedirs(self.run_dir)
        self.env = dict(os.environ, LAZYCACHE_RUN_DIR=self.run_dir)
        self.src = os.path.join(self.tmp, "src")
        self.store = os.path.join(self.tmp, "store")
        self.files = {}
        rng = random.Random(seed)
        for i in range(files):
            rel = ("sub/" if i % 2 else "") + "f%02d.bin" % i
            data = rng.randbytes(file_bytes + i * 977)
            os.makedirs(os.path.dirname(os.path.join(self.src, rel)), exist_ok=True)
            with open(os.path.join(self.src, rel), "wb") as f:
                f.write(data)
            self.files[rel] = data
        self.mounts = []
        self.procs = []
        self.proxy_port = None

    # ---- processes ----
    def lc(self, *args, timeout=120, check=False):
        p = subprocess.run([self.cli] + list(args), env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError("lazycache %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
        return p

    def save(self, key="faults", frame_size="64K"):
        self.lc("save", "--store", self.store, "--key", key, "--frame-size", frame_size, self.src, check=True)
        # The entry is named for src (KEY!VERSION.tar.zst, remote/cache_keys.h) and mounted
        # elsewhere with --any-paths, which lists a key's entries; a store that cannot list (the
        # proxy's plain HTTP, its S3 without ListObjectsV2) finds the name without a version,
        # as an older lazycache wrote it: a copy under that name serves those.
        for name in os.listdir(self.store):
            if name.startswith(key + "!") and name.endswith(".tar.zst"):
                shutil.copy(os.path.join(self.store, name), os.path.join(self.store, key + ".tar.zst"))

    def start_proxy(self, seed=11, upstream=None):
        """The fault proxy in front of `upstream` (http://HOST:PORT), else serving the local store."""
        port_file = os.path.join(self.tmp, "proxy.port")
        source = ["--upstream", upstream] if upstream else ["--origin-dir", self.store]
        p = subprocess.Popen([sys.executable, PROXY] + source + ["--seed", str(seed), "--port-file", port_file],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.procs.append(p)
        deadline = time.time() + 10
        while not os.path.exists(port_file):
            if p.poll() is not None or time.time() > deadline:
                raise AssertionError("fault proxy did not start: %s" % p.stderr.read().decode())
            time.sleep(0.02)
        with open(port_file) as f:
            self.proxy_port = int(f.read())
        return "http://127.0.0.1:%d" % self.proxy_port

    def proxy(self, method, path, body=None):
        req = urllib.request.Request("http://127.0.0.1:%d/__proxy/%s" % (self.proxy_port, path), data=body, method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read()

    def proxy_count(self):
        return json.loads(self.proxy("GET", "log"))["count"]

    def plan(self, rules):
        self.proxy("PUT", "plan", json.dumps(rules).encode())

    # ---- mounts ----
    def mount(self, store, mnt, cache, extra=(), key="faults"):
        try:
            os.makedirs(mnt, exist_ok=True)
        except FileExistsError:
            # A stale mount point of a killed daemon (stat gives ENOTCONN, so makedirs cannot
            # tell it is a directory): cleaning it is `mount`'s job, which the test checks.
            pass
        self.mounts.append(mnt)
        # The entry was saved from src, not mnt: --any-paths (the paths are part of its identity).
        return self.lc("mount", "--store", store, "--any-paths", "--key", key, "--cache-dir", cache, *extra, mnt, timeout=60)

    def daemon_pid(self, mnt, wait_s=5):
        """The live daemon serving mnt (its state file may trail the mount by one write).
        State files of killed daemons can linger (a zombie counts as alive for `mount`'s
        cleanup when nothing reaps it), so those are skipped."""
        deadline = time.time() + wait_s
        while True:
            pid = self._find_daemon(mnt)
            if pid is not None or time.time() > deadline:
                return pid
            time.sleep(0.05)

    def _find_daemon(self, mnt):
        for path in glob.glob(os.path.join(self.run_dir, "mount-*.state")):
            with open(path) as f:
                text = f.read()
            if ("mountpoint=%s\n" % mnt) not in text and not text.endswith("mountpoint=%s" % mnt):
                continue
            for tok in text.split():
                if tok.startswith("pid=") and process_running(int(tok[4:])):
                    return int(tok[4:])
        return None

    def unmount(self, mnt):
        p = self.lc("unmount", mnt, timeout=60)
        if p.returncode != 0 and os.path.ismount(mnt):
            detach(mnt)
        return p

    def close(self):
        for mnt in self.mounts:
            if os.path.ismount(mnt) or is_stale(mnt):
                p = self.lc("unmount", mnt, timeout=60)
                if os.path.ismount(mnt) or is_stale(mnt):
                    detach(mnt)
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if not os.environ.get("LC_KEEP_TEST_DIRS"):
            shutil.rmtree(self.tmp, ignore_errors=True)


def report(failures, summary=""):
    """Prints every failure and a count; the exit code for the test (1 if any failed)."""
    for f in failures:
        print("FAIL: " + f)
    print("%d failures%s" % (len(failures), summary))
    return 1 if failures else 0


def is_lazycache_overlay(path):
    """Is path a lazycache kernel overlay (a writable mount as root, tools/kernel_overlay.h)?"""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields, _, rest = line.partition(" - ")
            parts, tail = fields.split(), rest.split()
            if len(parts) > 4 and len(tail) > 1 and parts[4] == path and tail[0] == "overlay" and tail[1] == "lazycache":
                return True
    return False


_probes = [0]


def is_stale(path):
    """The mount at path lost its daemon: statfs says ENOTCONN (a FUSE mount), or, on a kernel
    overlay (whose statfs its upper directory answers), the lookup of a name never asked before."""
    try:
        os.statvfs(path)
    except OSError as e:
        # ECONNABORTED: the request was in flight when the connection died.
        return e.errno in (errno.ENOTCONN, errno.ECONNABORTED)
    if not is_lazycache_overlay(path):
        return False
    _probes[0] += 1
    try:
        os.lstat(os.path.join(path, ".stale-probe-%d-%d" % (os.getpid(), _probes[0])))
    except OSError as e:
        return e.errno in (errno.ENOTCONN, errno.ECONNABORTED)
    return False


def detach(path):
    """Detaches whatever is mounted at path, FUSE or a kernel overlay (a test's last resort)."""
    if subprocess.run(["fusermount3", "-u", "-z", path], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", path], capture_output=True)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


class TimedReader:
    """Reads files on worker threads with a deadline; a read stuck past it counts as a hang."""

    def __init__(self, workers=4):
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)

    def read(self, path, deadline_s):
        t0 = time.time()
        fut = self.pool.submit(read_file, path)
        try:
            data = fut.result(timeout=deadline_s)
            return "ok", data, time.time() - t0
        except concurrent.futures.TimeoutError:
            return "hang", None, time.time() - t0
        except OSError as e:
            return errno.errorcode.get(e.errno, str(e.errno)), None, time.time() - t0

    def close(self):
        self.pool.shutdown(wait=False, cancel_futures=True)


def process_running(pid):
    """True while any thread of pid is not a zombie: a killed multi-threaded process shows its
    leader as Z while other threads are still exiting, and its descriptors (the /dev/fuse one
    that makes a mount point stale) close only when the last thread is gone."""
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except (FileNotFoundError, ProcessLookupError):
        return False
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    return True
        except (FileNotFoundError, ProcessLookupError):
            continue
    return False


def kill9(pid, wait_s=10):
    """SIGKILL, then wait until the process is a zombie or gone: only then has the kernel closed
    its /dev/fuse descriptor, so the mount point is stale (not before)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.time() + wait_s
    while time.time() < deadline and process_running(pid):
        time.sleep(0.01)
