# SPDX-License-Identifier: MIT
"""Deep trees pack in linear time with few descriptors (issue 7, like deep_extract_test).

The packer used to open every file's directory by walking from its root (O(depth^2) openat for a
chain of directories) and the scan held one descriptor per level of the tree. This test packs a
chain of 500 and of 2,000 directories (each holding a file, with side chains of 100 directories
that make the walk jump back far above its descriptor window) through the CLI:
  - under strace, counting every openat/open the process makes: at most 3 per entry, and the
    count per entry at 2,000 levels within 1.5x the count at 500 (quadratic would be ~depth/2);
  - with the open-files limit lowered to 256 (a descriptor per level would need 2,000);
  - `zstd -d | tar -x` of the archive matches the source tree, walked by descriptor (the paths
    are far longer than PATH_MAX).
Exit 77 (skipped) when strace cannot trace here.
"""
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

FD_LIMIT = 256
MAX_OPENAT_PER_ENTRY = 3.0


def build_tree(root, depth):
    """Returns {relative path components: bytes} of every file, and the entry count."""
    files = {}
    entries = 1
    os.mkdir(root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    comps = []
    try:
        for i in range(depth):
            os.mkdir("d", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
            comps.append("d")
            name = "f%d" % i
            data = ("level %d\n" % i).encode() * (1 + i % 7)
            write_at(fd, name, data)
            files[tuple(comps + [name])] = data
            entries += 2
            if i % 500 == 250:
                side = os.dup(fd)
                side_comps = list(comps)
                for k in range(100):
                    os.mkdir("s", dir_fd=side)
                    n2 = os.open("s", os.O_RDONLY | os.O_DIRECTORY, dir_fd=side)
                    os.close(side)
                    side = n2
                    side_comps.append("s")
                write_at(side, "leaf", b"side %d\n" % i)
                files[tuple(side_comps + ["leaf"])] = b"side %d\n" % i
                os.close(side)
                entries += 101
    finally:
        os.close(fd)
    return files, entries


def write_at(dirfd, name, data):
    f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dirfd)
    os.write(f, data)
    os.close(f)


def differing_files(base, files):
    """Paths (component tuples) of `files` whose bytes below `base` differ or are missing.
    Walks like a directory stack: one openat per directory step, not per level from the top."""
    bad = []
    path, fds = [], [os.open(base, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        for comps in sorted(files):
            dirs = list(comps[:-1])
            common = 0
            while common < min(len(path), len(dirs)) and path[common] == dirs[common]:
                common += 1
            while len(path) > common:
                path.pop()
                os.close(fds.pop())
            try:
                for c in dirs[common:]:
                    fds.append(os.open(c, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
                    path.append(c)
                f = os.open(comps[-1], os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fds[-1])
                with os.fdopen(f, "rb") as fh:
                    if fh.read() != files[comps]:
                        bad.append(comps)
            except OSError:
                bad.append(comps)
    finally:
        for fd in fds:
            os.close(fd)
    return bad


def count_tree(base):
    """(files, directories) below base. GNU find walks by descriptor, past PATH_MAX (Python's
    os.fwalk recurses once per level and hits the interpreter's recursion limit)."""
    def count(kind):
        p = subprocess.run(["find", base, "-mindepth", "1", "-type", kind, "-printf", "."], capture_output=True, text=True)
        return len(p.stdout) if p.returncode == 0 else -1
    return count("f"), count("d")


def lower_fd_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


def strace_usable(tmp):
    p = subprocess.run(["strace", "-f", "-e", "trace=openat", "-o", os.path.join(tmp, "probe"), "true"],
                       capture_output=True, text=True)
    return p.returncode == 0


def pack_and_check(cli, tmp, depth, failures):
    src = os.path.join(tmp, "src%d" % depth)
    files, entries = build_tree(src, depth)
    out = os.path.join(tmp, "deep%d.tar.zst" % depth)
    trace = os.path.join(tmp, "trace%d" % depth)
    t0 = time.time()
    # LeakSanitizer cannot run under ptrace (it aborts an ASan build): off for this run only; the
    # other CLI tests check pack for leaks.
    asan = os.environ.get("ASAN_OPTIONS", "")
    env = dict(os.environ, ASAN_OPTIONS=(asan + ":" if asan else "") + "detect_leaks=0")
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", trace, cli, "pack", "-o", out,
                        "src%d" % depth], cwd=tmp, capture_output=True, text=True, preexec_fn=lower_fd_limit,
                       timeout=600, env=env)
    seconds = time.time() - t0
    if p.returncode != 0:
        failures.append("depth %d: pack with the open-files limit at %d failed (%d): %s" %
                        (depth, FD_LIMIT, p.returncode, p.stderr.strip()[-2000:]))
        return None
    with open(trace) as f:
        opens = sum(1 for line in f if " open(" in line or " openat(" in line)
    per_entry = opens / entries
    print("depth %d: %d entries, %d open/openat (%.2f per entry), pack %.2f s under strace" %
          (depth, entries, opens, per_entry, seconds))
    if per_entry > MAX_OPENAT_PER_ENTRY:
        failures.append("depth %d: %.2f open/openat per entry (at most %.1f allowed): quadratic walk?" %
                        (depth, per_entry, MAX_OPENAT_PER_ENTRY))

    x = os.path.join(tmp, "x%d" % depth)
    os.mkdir(x)
    with open(out, "rb") as archive:
        z = subprocess.Popen(["zstd", "-dq"], stdin=archive, stdout=subprocess.PIPE)
        t = subprocess.run(["tar", "-x", "-C", x], stdin=z.stdout, capture_output=True, text=True)
        z.stdout.close()
        z.wait()
    if z.returncode != 0 or t.returncode != 0:
        failures.append("depth %d: zstd -d | tar -x failed (zstd %d, tar %d): %s" %
                        (depth, z.returncode, t.returncode, t.stderr.strip()[-1000:]))
        return per_entry
    got_files, got_dirs = count_tree(x)
    want_files, want_dirs = len(files), entries - len(files)  # the root's own directory included
    if (got_files, got_dirs) != (want_files, want_dirs):
        failures.append("depth %d: extracted %d files and %d directories, the source has %d and %d" %
                        (depth, got_files, got_dirs, want_files, want_dirs))
    bad = differing_files(os.path.join(x, "src%d" % depth), files)
    if bad:
        failures.append("depth %d: %d extracted files differ from the source, first at level %d" %
                        (depth, len(bad), len(bad[0]) - 1))
    return per_entry


def main():
    cli = os.path.abspath(sys.argv[1])
    if shutil.which("strace") is None or shutil.which("zstd") is None:
        print("SKIP: strace and zstd are needed (.ci/install-deps.sh installs them)")
        return 77
    tmp = tempfile.mkdtemp(prefix="lc-deep-pack-")
    try:
        if not strace_usable(tmp):
            print("SKIP: strace cannot trace in this environment")
            return 77
        failures = []
        small = pack_and_check(cli, tmp, 500, failures)
        large = pack_and_check(cli, tmp, 2000, failures)
        if small is not None and large is not None and large > small * 1.5:
            failures.append("open/openat per entry grows with depth: %.2f at 500 levels, %.2f at 2,000" % (small, large))
        for f in failures:
            print("FAIL: " + f)
        print("%d failures" % len(failures))
        return 1 if failures else 0
    finally:
        # shutil.rmtree recurses once per level (Python's recursion limit); rm walks any depth.
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    sys.exit(main())
