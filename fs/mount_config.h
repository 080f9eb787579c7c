// SPDX-License-Identifier: MIT
// File: fs/mount_config.h -- FuseMountConfig: the settings of one mount point, as plain data.
// FUSE-free, so tools/ and tests fill it in without libfuse's headers; the glue that mounts it is
// fs/fuse_adapter.h (read-only) and fs/overlay_fuse.h (writable). Which file system a mount
// serves is not a setting: it is the argument of the mount call.
#pragma once

#include <string>

#include "format/archive.h"

namespace lazycache::fs {

struct FuseMountConfig {
  std::string mountpoint;
  format::EntryId root = 0;  // the directory entry served as the mount's top
  bool allow_other = false;  // let other users in (root, or user_allow_other in /etc/fuse.conf)
  // One day: the archive is immutable, so the kernel may trust what it was told until unmount.
  // A writable mount keeps it too: every change passes through the mount, which tells the kernel.
  double timeout_seconds = 86400;
  // Handler threads. Replies come from fetch threads, so handlers never wait on the network;
  // 16 covers metadata storms (find, stat) on 2-8 cores.
  int max_threads = 16;
  // 64 background requests (readahead, async reads) instead of the kernel's 12.
  unsigned max_background = 64;
  std::string fsname = "lazycache";
  // Read-only op table only: when the kernel supports zero-message opens, the first OPEN and
  // OPENDIR are answered with ENOSYS (after the checks a real open makes), and from then on the
  // kernel opens files and directories without a round trip to the daemon; READs then carry no
  // handle and take one by file (fs/inode_handles.h). The daemon stops seeing opens: the files
  // it counts as opened, its access list and the directory prefetch of a first open follow the
  // files it READs. Off: every open is a request (`mount --open-requests always`).
  bool kernel_opens = false;
  // Where FUSE mounts when a kernel overlayfs is stacked on it (tools/kernel_overlay.h): a private
  // directory that the caller detaches once the overlay holds the mount. `mountpoint` is then the
  // overlay's, where the user sees the files, and what stop() detaches (the FUSE session ends when
  // the overlay lets go of it). Empty: FUSE mounts at `mountpoint` itself.
  std::string mount_at;
};

}  // namespace lazycache::fs
