#!/bin/bash
# SPDX-License-Identifier: MIT
# Writable mounts as a kernel overlayfs over a read-only FUSE mount (tools/kernel_overlay.h), the
# default as root, through the CLI as a user runs it:
#  - the mount table shows one overlay (source "lazycache", volatile) at the path and no FUSE mount;
#  - the POSIX script (posix_script.sh) prints the same on the mount as on a plain copy;
#  - unmount --save (incremental, cross-checked against a scan of the mount) saves exactly the
#    tree the script left: mounted again, and extracted with stock zstd | tar;
#  - the job's opens reach the daemon (fanotify): the save puts them first (its hot list);
#  - a plain umount ends the daemon; a killed daemon leaves a stale overlay that `status` and the
#    next mount clean up; --overlay fuse and --upper-dir keep the daemon's own overlay.
# Usage: kernel_overlay_test.sh LAZYCACHE
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/cli_test_lib.sh"
cli_test_setup "$1" lc-kernel-overlay
[ "$(id -u)" = 0 ] || { echo "SKIP: a kernel overlay needs root"; exit 0; }
P2=
trap '[ -n "$P2" ] && mountpoint -q "$P2" && "$LC" unmount --lazy "$P2" > /dev/null 2>&1; cli_test_cleanup' EXIT

fstype_at() { awk -v m="$1" '$5 == m { for (i = 7; i <= NF; i++) if ($i == "-") print $(i+1), $(i+2) }' /proc/self/mountinfo; }
daemon_of() { sed -n 's/^pid=//p' "$(grep -l "^mountpoint=$1\$" "$LAZYCACHE_RUN_DIR"/mount-*.state | head -1)"; }
gone() { for _ in $(seq 100); do [ -d "/proc/$1" ] || return 0; sleep 0.05; done; return 1; }

# The tree of tests/fs/fs_test_util.h make_node_like_tree (40 packages), which posix_script.sh expects.
python3 - "$W/src" <<'EOF'
import os, sys
root = sys.argv[1]; nm = root + "/node_modules"
os.makedirs(nm + "/.bin")
def data(n, seed):
    return bytes((i * 131 + seed * 7 + (i >> 7)) & 0xff for i in range(n))
for p in range(40):
    pkg = f"{nm}/pkg-{p}"; os.makedirs(pkg + "/lib")
    open(pkg + "/package.json", "w").write('{"name":"pkg-%d","version":"1.0.%d"}\n' % (p, p))
    open(pkg + "/index.js", "wb").write(data(200 + (p * 37) % 3000, 1000 + p))
    open(pkg + "/lib/util.js", "wb").write(data(500 + (p * 91) % 9000, 7000 + p)); os.chmod(pkg + "/lib/util.js", 0o755)
    if p % 10 == 0: open(pkg + "/lib/big.bin", "wb").write(data(300000 + p * 1000, 1 + p))
    if p % 7 == 0: open(pkg + "/EMPTY", "w").close()
    if p % 13 == 0: os.mkdir(pkg + "/empty-dir", 0o700)
    if p % 5 == 0: os.symlink(f"../pkg-{p}/index.js", f"{nm}/.bin/cmd-{p}")
    if p % 17 == 0: os.link(pkg + "/package.json", pkg + "/package.hardlink.json")
    os.utime(pkg + "/index.js", ns=((1600000000 + p) * 10**9 + 123456789,) * 2)
    os.utime(pkg + "/package.json", ns=(1500000000 * 10**9,) * 2)  # headers alike across packages
EOF
# posix_script.sh runs in the parent of node_modules: the mount point is such a node_modules.
P=$W/job/node_modules
mkdir -p "$W/job" "$W/plain"
cp -a "$W/src/node_modules" "$P"
"$LC" save -q --frame-size 64K --key base "$P"  # small frames: the saves below copy some, repack others
rm -rf "$P"
cp -a "$W/src/node_modules" "$W/plain/node_modules"

# 1. The mount: one overlay of ours at the path, nothing else.
"$LC" mount --key next --restore-keys base "$P" > "$W/mount.out"
[ "$(fstype_at "$P")" = "overlay lazycache" ] || fail "expected a lazycache overlay at $P, got: $(fstype_at "$P")"
! grep " - fuse.lazycache " /proc/self/mountinfo | grep -q "$W" || fail "a FUSE mount is visible"
# volatile from Linux 5.10 (shown as "volatile" or "fsync=volatile"): the unmount does not sync the
# upper directory's file system, which is the chunk cache's.
if printf '%s\n' 5.10 "$(uname -r)" | sort -V -C; then
  awk -v m="$P" '$5 == m' /proc/self/mountinfo | grep -q volatile || fail "the overlay is not volatile: $(awk -v m="$P" '$5 == m' /proc/self/mountinfo)"
fi
"$LC" status "$P" > /dev/null || fail "status does not know the overlay"

# 2. The POSIX script: same output on the mount as on the plain copy.
on_mount=$(bash "$HERE/posix_script.sh" "$W/job")
on_plain=$(bash "$HERE/posix_script.sh" "$W/plain")
if [ "$on_mount" != "$on_plain" ]; then
  diff <(echo "$on_plain") <(echo "$on_mount") | head -20 >&2
  fail "posix_script.sh prints differently on the kernel overlay"
fi
# A read of archive files the script did not touch: the open feed must see them.
cat "$P"/pkg-2[0-9]/package.json > /dev/null

# 3. unmount --save: incremental although the script renamed archive directories (overlayfs
#    redirects: the tree follows them), cross-checked (LAZYCACHE_SAVE_CROSSCHECK=1); hot files first.
"$LC" unmount --save "$P" > "$W/save.out" 2>&1 || { cat "$W/save.out" >&2; fail "unmount --save"; }
grep -q "reused" "$W/save.out" || { cat "$W/save.out" >&2; fail "the save was not incremental"; }
hot=$(sed -n 's/.* \([0-9][0-9]*\) hot files first.*/\1/p' "$W/save.out")
[ "${hot:-0}" -ge 10 ] || { cat "$W/save.out" >&2; fail "the job's opens did not reach the hot list (hot=${hot:-none})"; }
[ -z "$(fstype_at "$P")" ] || fail "still mounted after unmount --save"
gone "$(sed -n 's/.*daemon pid \([0-9]*\).*/\1/p' "$W/mount.out")" || fail "the daemon outlived the unmount"

expected=$(listing "$W/plain/node_modules")
"$LC" mount --read-only --key next "$P" > /dev/null
[ "$(listing "$P")" = "$expected" ] || { diff <(echo "$expected") <(listing "$P") | head >&2; fail "the saved tree differs from the plain one"; }
"$LC" unmount "$P" > /dev/null
mkdir -p "$W/tar"
zstd -dc < "$(entry_file next)" | tar -x -C "$W/tar"
[ "$(listing "$W/tar${P}")" = "$expected" ] || fail "zstd -d | tar -x of the saved entry differs"

# 3b. More changes on the saved entry: whiteouts, an opaque directory, copy-ups, a chmod, new
#     files, symlinks, hardlinks, and a directory moved away and one moved over a deleted one
#     whose archive files look the same (same size, mode and mtime): their bytes must be the
#     moved ones, never the base's.
"$LC" mount --key third --restore-keys next "$P" > /dev/null
for dir in "$P" "$W/plain/node_modules"; do
  echo changed >> "$dir/pkg-20/index.js"
  rm -rf "$dir/pkg-21" "$dir/pkg-22/lib"
  mkdir "$dir/pkg-22/lib" && echo new > "$dir/pkg-22/lib/fresh.js"
  chmod 600 "$dir/pkg-23/package.json"
  ln -s ../pkg-24/index.js "$dir/pkg-24/alias.js"
  ln "$dir/pkg-25/package.json" "$dir/pkg-25/linked.json"
  rm "$dir/pkg-26/index.js"
  mkdir -p "$dir/brand/new" && printf 'x%.0s' $(seq 5000) > "$dir/brand/new/file"
  mv "$dir/pkg-27/lib" "$dir/brand/lib-of-27"
  rm -rf "$dir/pkg-29"
  mv "$dir/pkg-28" "$dir/pkg-29"
done
"$LC" unmount --save "$P" > "$W/save3.out" 2>&1 || { cat "$W/save3.out" >&2; fail "incremental unmount --save"; }
grep -q "reused" "$W/save3.out" || { cat "$W/save3.out" >&2; fail "the save was not incremental"; }
expected=$(listing "$W/plain/node_modules")
"$LC" mount --read-only --key third "$P" > /dev/null
[ "$(listing "$P")" = "$expected" ] || { diff <(echo "$expected") <(listing "$P") | head >&2; fail "the incremental save differs from the plain tree"; }
"$LC" unmount "$P" > /dev/null

# 3c. A directory moved over a deleted one whose files have the same headers (size, mode, mtime),
#     on a tree of incompressible files in small frames, so the save copies the base's frames
#     around them: the moved files' bytes must be saved, never the base's at that path.
P2=$W/job2/nm
python3 - "$P2" <<'EOF2'
import os, sys
nm = sys.argv[1]
for p in range(10, 60):
    d = f"{nm}/pkg-{p}"; os.makedirs(d)
    open(d + "/package.json", "w").write('{"name":"pkg-%d"}\n' % p)
    os.utime(d + "/package.json", ns=(1500000000 * 10**9,) * 2)
    open(d + "/blob", "wb").write(os.urandom(100000))
EOF2
"$LC" save -q --frame-size 64K --key moved-base "$P2"
rm -rf "$P2"
"$LC" mount --key moved --restore-keys moved-base "$P2" > /dev/null
rm -rf "$P2/pkg-29"
mv "$P2/pkg-28" "$P2/pkg-29"
"$LC" unmount --save "$P2" > "$W/save-moved.out" 2>&1 || { cat "$W/save-moved.out" >&2; fail "unmount --save of the moved directory"; }
grep -q "frames reused" "$W/save-moved.out" || { cat "$W/save-moved.out" >&2; fail "the save of the moved directory was not incremental"; }
"$LC" mount --read-only --key moved "$P2" > /dev/null
got=$(cat "$P2/pkg-29/package.json")
"$LC" unmount "$P2" > /dev/null
[ "$got" = '{"name":"pkg-28"}' ] || fail "pkg-29/package.json after the move holds $got, not pkg-28's bytes"

# 4. A plain umount ends the daemon and its state (once the name walk at mount is done: its
#    open directory keeps any mount busy meanwhile).
"$LC" mount --key next "$P" > "$W/mount.out"
pid=$(daemon_of "$P")
for _ in $(seq 100); do "$LC" status --json "$P" | grep -q '"warm_active":0' && break; sleep 0.05; done
umount "$P"
gone "$pid" || fail "daemon $pid outlived a plain umount"

# 4b. The tree walk at mount lists the detached FUSE mount below the overlay (its root reached by
#     a descriptor, tools/cmd_mount.cpp): the job's lookups through the overlay then send none to
#     the daemon (the walk's own, of the hot directories it lists before their parents, come
#     before), and the final figures keep the walk's.
"$LC" mount --key next "$P" > /dev/null
for _ in $(seq 100); do "$LC" status --json "$P" | grep -q '"warm_active":0' && break; sleep 0.05; done
"$LC" status --json "$P" > "$W/walked.json"
find "$P" -type f -exec stat {} + > /dev/null
"$LC" unmount --json "$P" > "$W/walk.json"
python3 - "$W/walked.json" "$W/walk.json" "$(find "$W/plain/node_modules" -mindepth 1 | wc -l)" <<'EOF2' || fail "the walk below the overlay"
import json, sys
def stats(path):
    d = json.load(open(path))
    d = d[0] if isinstance(d, list) else d
    return d["stats"] if "stats" in d else d
walked, end, names = stats(sys.argv[1]), stats(sys.argv[2]), int(sys.argv[3])
# The plain copy went through the POSIX script and "next" is its save: about the same names.
assert end["warm_entries"] >= names * 0.9, "the walk listed %d names of %d" % (end["warm_entries"], names)
job = end["requests_lookup"] - walked["requests_lookup"]
# At most unmount's probe of a fresh name (is the overlay stale?) and the root's.
assert job <= 2, "%d lookups reached the daemon after the walk (%s)" % (job, end["requests_lookup"])
EOF2

# 5. A killed daemon: reads fail, status calls it stale and cleans it, the next mount works.
#    Its helper processes (the open feed, common/helper_process.h) die with it.
"$LC" mount --key next "$P" > /dev/null
pid=$(daemon_of "$P")
helpers=$(ps -o pid= --ppid "$pid" | tr -d ' ')
[ -n "$helpers" ] || fail "no helper process under daemon $pid (the open feed)"
cat "$P"/pkg-1*/package.json > /dev/null  # the feed closes these files' event descriptors meanwhile
kill -9 "$pid"
gone "$pid" || fail "daemon $pid survived SIGKILL"
for h in $helpers; do gone "$h" || fail "helper $h of the killed daemon $pid survived it"; done
if "$LC" status "$P" > "$W/status.out" 2>&1; then fail "status of a stale overlay exits 0"; fi
grep -q "gone" "$W/status.out" || { cat "$W/status.out" >&2; fail "status did not report the stale mount"; }
[ -z "$(fstype_at "$P")" ] || fail "the stale overlay is still mounted after status"
"$LC" mount --key next "$P" > /dev/null
kill -9 "$(daemon_of "$P")"
sleep 0.2
"$LC" mount --key next "$P" > "$W/mount.out" 2>&1 || { cat "$W/mount.out" >&2; fail "mount over a stale overlay"; }
grep -q "cleaned up a stale mount" "$W/mount.out" || fail "the next mount did not say it cleaned a stale overlay"
"$LC" unmount "$P" > /dev/null

# 6. The daemon's own overlay where asked, and for a user's --upper-dir.
"$LC" mount --overlay fuse --key next "$P" > /dev/null
[ "$(fstype_at "$P" | cut -d' ' -f1)" = "fuse.lazycache" ] || fail "--overlay fuse did not mount FUSE"
"$LC" unmount "$P" > /dev/null
"$LC" mount --upper-dir "$W/my-upper" --key next "$P" > /dev/null
[ "$(fstype_at "$P" | cut -d' ' -f1)" = "fuse.lazycache" ] || fail "--upper-dir did not keep the FUSE overlay"
"$LC" unmount "$P" > /dev/null
if "$LC" mount --overlay bogus --key next "$P" > /dev/null 2>&1; then fail "--overlay bogus accepted"; fi
echo "PASS"
