// SPDX-License-Identifier: MIT
// File: fs/overlay_fuse.h -- the writable mount: the libfuse low-level op table whose every
// request goes to one fs::Overlay (fs/overlay.h), served by a FuseMount session
// (fs/fuse_adapter.h). Part of the FUSE glue (lc_fs_fuse). Errors reach the kernel through
// fs/errno_map.h, as in the read-only table. The table's userdata holds the Overlay and the
// config; it knows nothing of the read-only table. Inode numbers are the Overlay's, which keeps
// the read-only table's rule for archive entries (fs/inode_numbers.h).
//
// Caching: entry and attribute timeouts stay long, and negative lookups are cached as long,
// since every change passes through this kernel mount and the kernel updates its own caches for
// them; readdir results are not cached (cache_readdir off) because directories change. Archive
// files opened read-only keep their page cache across opens; upper files do not. Archive files
// still served from the archive are handed whole to the page cache when their frame is decoded,
// as on a read-only mount (Overlay::offer_to_page_cache: never one copied up, opened for writing,
// truncated or created). Requests are counted by kind (FuseMount::requests()).
#pragma once

#include <memory>

#include "fs/fuse_adapter.h"
#include "fs/mount_config.h"

namespace lazycache::fs {

class Overlay;

// Mounts `overlay` writable at `config.mountpoint` (config.root is the overlay's own root, for
// the caller's records) and returns without serving yet. `overlay` must outlive the mount.
// Errors: kIo (the mount call failed; message names the mount point), kInternal.
Result<std::unique_ptr<FuseMount>> mount_overlay(Overlay& overlay, FuseMountConfig config);

}  // namespace lazycache::fs
