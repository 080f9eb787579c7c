// SPDX-License-Identifier: MIT
// File: tools/mount_holders.h -- who keeps a mount busy: the check `unmount` makes before it
// saves or unmounts, so a busy mount is reported (with the holders) before anything changes.
//
// A mount is busy for umount(2) while a process has a file of it open, has its working or root
// directory or executable on it, maps one of its files, or another file system is mounted below
// it. This scans /proc like `fuser -m` does, without touching the mount itself (an fd's mount is
// read from /proc/PID/fdinfo, a map's device from /proc/PID/maps), so a hung daemon cannot hang
// it. Processes this user may not inspect are missed (as root: none); the scan is a snapshot, so
// callers must still handle EBUSY from the unmount itself.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace lazycache::cli {

struct MountHolder {
  pid_t pid = 0;     // 0 for a mount below the path
  pid_t parent = 0;  // the process's parent (a mount daemon's tree walk is its child, fs/tree_walk.h)
  std::string name;  // the process's comm, or the mount point below the path
  std::string what;  // "fd 3 /mnt/x/file", "working directory", "maps /mnt/x/lib.so", "mounted below"
};

// The holders of the mount at `mountpoint` (absolute, as in /proc/self/mountinfo); empty when it
// is idle or is not a mount point.
std::vector<MountHolder> find_mount_holders(const std::string& mountpoint);

// True when `h` is the daemon `daemon_pid` itself or its tree walk (fs/tree_walk.h): not a user
// of the mount, the unmount ends it.
bool is_daemon_or_its_walk(const MountHolder& h, pid_t daemon_pid);

// "pid 1234 (sleep): fd 3 /ws/deps/a.txt; ..." (at most `max` holders, then "and N more").
std::string describe_holders(const std::vector<MountHolder>& holders, size_t max = 5);

// The advice every busy report ends with.
std::string busy_advice(const std::string& mountpoint);

}  // namespace lazycache::cli
