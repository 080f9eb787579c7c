// SPDX-License-Identifier: MIT
// File: tools/kernel_overlay.h -- a writable mount as a kernel overlayfs over a read-only
// lazycache FUSE mount (`mount --overlay kernel`, the default as root).
//
// Why: through the daemon's own overlay (fs/overlay_fuse.h) every open, release, opendir and
// releasedir of the job is a FUSE request, ~63,000 more than a read-only mount on a full read of
// the node fixture (5.3-5.8 s against 3.6-3.8 s, docs/mount.md). Over a read-only mount with
// zero-message opens, overlayfs opens lower files without asking the daemon, and caches
// listings; writes go to the upper directory on local disk without passing through FUSE at all.
//
// Layout, in the mount's state directory (the one the FUSE overlay would use, so save records,
// unmount and the incremental save find it as before):
//   lower/  where FUSE mounts; detached as soon as the overlay holds it, so the mount table shows
//           only the overlay at the user's path (source "lazycache"), and the FUSE session ends
//           when the overlay is unmounted (by `lazycache unmount` or a plain umount);
//   upper/  overlayfs's upper directory: changed entries, whiteouts as 0/0 character devices,
//           opaque directories marked trusted.overlay.opaque (read by fs/overlay_tree.h);
//   work/   overlayfs's work directory.
// Options: redirect_dir=on (an archive directory can be renamed, as POSIX wants: overlayfs marks
// the moved directory with trusted.overlay.redirect; the incremental save then gives way to a full
// pack, fs/overlay_changes.h), metacopy=off (a chmod copies the whole file: upper/ always holds
// the bytes), index=off, volatile (Linux 5.10+: the overlay never syncs its upper file system;
// without it the unmount synced the whole file system the state directory is on, which is the
// chunk cache's: after the fill of the large fixture's 608 MiB archive an idle unmount took
// 320-390 ms instead of 15-18 ms. upper/ is the job's scratch: unmount discards it, or
// unmount --save packs it from the page cache, and a crash before that loses the job anyway; a
// job's fsync inside the mount returns without writing to disk, as under eatmydata). The job's
// opens reach the daemon through fanotify on the overlay
// (tools/fanotify_tracer.h), which keeps the access list for the learned layout.
// Known difference from a plain directory (docs/writable.md): a hardlink made to an archive file
// reports another inode number than the file's first name (overlayfs without index=on, which
// needs file handles FUSE does not give here); content, link count and the save are right.
#pragma once

#include <string>

#include "common/status.h"
#include "fs/filesystem.h"

namespace lazycache::cli {

struct KernelOverlayDirs {
  std::string lower, upper, work;
};

// The directories of a kernel overlay kept in `state_dir`.
KernelOverlayDirs kernel_overlay_dirs(const std::string& state_dir);

// Creates the three directories; a fresh upper/ gets the mode, owner and mtime of `root`, which
// the overlay's root shows until the job changes it. Errors: kIo naming the directory;
// kUnsupported when a path holds a character the overlay's option string cannot carry.
Status prepare_kernel_overlay(const KernelOverlayDirs& dirs, const fs::Attr& root);

// Mounts the overlay at `target` over a FUSE mount at dirs.lower, then detaches dirs.lower.
// Errors: kPermissionDenied (not root), kUnsupported (no overlayfs, or an upper file system it
// refuses), kIo otherwise; nothing is left mounted at `target` on error.
Status mount_kernel_overlay(const KernelOverlayDirs& dirs, const std::string& target);

// Whether `state_dir` (a save record's) belongs to a kernel overlay rather than the FUSE overlay.
bool is_kernel_overlay_state(const std::string& state_dir);

// The mount table's source of every lazycache kernel overlay (how `status` and `unmount` tell it
// from other overlays).
inline constexpr const char* kKernelOverlaySource = "lazycache";

}  // namespace lazycache::cli
