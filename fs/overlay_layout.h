// SPDX-License-Identifier: MIT
// File: fs/overlay_layout.h -- the names the overlay reserves in its upper directory (the
// layout is described in fs/overlay.h): written once here for the overlay and for the change
// scan of `unmount --save` (overlay_changes.cpp, overlay_tree.cpp). Also the markers a kernel
// overlayfs writes into an upper directory (tools/kernel_overlay.h), which the same scans read:
// a whiteout is a character device 0/0, an opaque directory has trusted.overlay.opaque = "y",
// and the kernel's own attributes (trusted.overlay.*) are never the user's.
#pragma once

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <string>
#include <string_view>

namespace lazycache::fs {

// ".wh.NAME" (an empty file) hides NAME of the archive.
inline constexpr std::string_view kWhiteoutPrefix = ".wh.";
// In a directory: hides every archive entry below it (the directory is opaque).
inline constexpr std::string_view kOpaqueMarker = ".wh..wh..opq";

// Names the overlay keeps for itself (whiteouts, the opaque marker): never user entries.
inline bool overlay_reserved_name(std::string_view name) { return name.substr(0, kWhiteoutPrefix.size()) == kWhiteoutPrefix; }

// The whiteout that hides NAME; with an empty name, the opaque marker.
inline std::string overlay_marker_name(std::string_view name) {
  return name.empty() ? std::string(kOpaqueMarker) : std::string(kWhiteoutPrefix) + std::string(name);
}

// A kernel overlayfs whiteout: hides the lower entry of its name.
inline bool kernel_overlay_whiteout(const struct stat& st) { return S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0); }
inline constexpr const char* kKernelOpaqueXattr = "trusted.overlay.opaque";
// On a directory renamed from elsewhere in the lower layer: where its lower content is.
inline constexpr const char* kKernelRedirectXattr = "trusted.overlay.redirect";
inline constexpr std::string_view kKernelXattrPrefix = "trusted.overlay.";

}  // namespace lazycache::fs
