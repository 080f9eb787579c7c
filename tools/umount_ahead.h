// SPDX-License-Identifier: MIT
// File: tools/umount_ahead.h -- umount(2) that returns once the mount is gone, not once the
// kernel has freed what it held.
//
// Why: the process whose umount2 drops a FUSE mount's last reference also does the teardown,
// before the call returns: it aborts the connection (the daemon sees it, writes its figures and
// exits), then evicts every inode of the mount with its page cache. After the tree walk at mount
// (fs/tree_warmer.h) and a job, that is ~25,000 inodes and ~100 MiB of pages on the node fixture:
// umount2 took 0.10-0.19 s instead of 0.03 s, time nobody needs to wait for (the path is already
// free, the daemon gone). So the umount2 runs in a detached grandchild, and the caller returns as
// soon as the mount has left this mount namespace (/proc/self/mountinfo, polled for POLLPRI), or
// with the grandchild's error (EBUSY comes before anything changes).
#pragma once

#include <string>

namespace lazycache::cli {

// umount2(path, flags) as above. Returns 0, or the errno of the umount2 (EBUSY, EINVAL, ...).
// Falls back to calling umount2 here when the fork or the pipe fails.
int umount_ahead_of_teardown(const std::string& path, int flags);

}  // namespace lazycache::cli
