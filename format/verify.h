// SPDX-License-Identifier: MIT
// File: format/verify.h -- verify_archive(): a full check of an archive against itself.
// Reads and decodes every frame (XXH3-128 of the compressed bytes, Frame_Content_Size, the
// seek-table XXH64 checksum), walks the tar stream and checks that every member matches its
// index entry (type, path, size, data offset, mode, uid/gid, mtime, link target, content
// digest), and that every index entry has its member.
#pragma once

#include <cstdint>
#include <functional>

#include "common/status.h"
#include "format/archive.h"

namespace lazycache::format {

struct VerifyStats {
  uint32_t frames = 0;
  uint64_t members = 0;
  uint64_t uncompressed_bytes = 0;
};

// Blocking, single-threaded. `progress(frames_done)` is called after each frame.
// Errors: kCorrupt naming the frame or member that failed, and the source's errors.
Result<VerifyStats> verify_archive(const ArchiveReader& reader, const std::function<void(uint32_t)>& progress = {});

}  // namespace lazycache::format
