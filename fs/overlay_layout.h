// SPDX-License-Identifier: MIT
// File: fs/overlay_layout.h -- the names the overlay reserves in its upper directory (the
// layout is described in fs/overlay.h): written once here for the overlay and for the change
// scan of `unmount --save` (overlay_changes.cpp).
#pragma once

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

}  // namespace lazycache::fs
