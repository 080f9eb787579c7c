// SPDX-License-Identifier: MIT
// File: fs/overlay_fuse.h -- the libfuse low-level op table of a writable mount: every request
// goes to the mount's fs::Overlay (fs/overlay.h); FuseMount (fs/fuse_adapter.h) uses this table
// instead of the read-only one when FuseMountConfig::overlay is set. Errors reach the kernel
// through fs/errno_map.h, as in the read-only table.
//
// Caching: entry and attribute timeouts stay long, since every change passes through this
// kernel mount and the kernel updates its own caches for them; readdir results are not cached
// (cache_readdir off) because directories change. Archive files opened read-only keep their
// page cache across opens; upper files do not.
#pragma once

struct fuse_lowlevel_ops;

namespace lazycache::fs {

// The op table; its userdata must be the FuseMount whose config().overlay is non-null.
const fuse_lowlevel_ops* overlay_ops();

}  // namespace lazycache::fs
