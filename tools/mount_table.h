// SPDX-License-Identifier: MIT
// File: tools/mount_table.h -- the kernel's mount table (/proc/self/mountinfo), parsed once
// for the tools that need to know what is mounted where: `unmount`, `status`, the busy check.
#pragma once

#include <string>
#include <vector>

namespace lazycache::cli {

struct MountEntry {
  int mount_id = 0;        // field 1: what /proc/PID/fdinfo/N calls mnt_id
  unsigned dev_major = 0;  // field 3, "major:minor": the st_dev of files on the mount
  unsigned dev_minor = 0;
  std::string mountpoint;  // field 5, unescaped (mountinfo writes space, tab, \n, \ as \ooo)
  std::string fstype;      // the first field after " - ", e.g. "fuse.lazycache"
  std::string source;      // the second, e.g. "lazycache" (a kernel overlay's, tools/kernel_overlay.h)
};

// A lazycache mount: its FUSE file system, or a kernel overlay over one (tools/kernel_overlay.h).
bool is_lazycache_entry(const MountEntry& e);
// A lazycache kernel overlay.
bool is_lazycache_overlay_entry(const MountEntry& e);

// Every entry of /proc/self/mountinfo, in the kernel's order; empty if it cannot be read.
std::vector<MountEntry> read_mount_table();

}  // namespace lazycache::cli
