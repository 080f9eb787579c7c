// SPDX-License-Identifier: MIT
// File: format/frame_codec.h -- one zstd data frame in, one out, with the checks the format
// requires. Each thread keeps its own contexts (thread_local), so both calls are thread-safe.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "common/status.h"
#include "format/archive.h"

namespace lazycache::format {

// Compresses `data` as one frame with Frame_Content_Size and zstd's own content checksum.
// Deterministic for a given level. Errors: kInternal.
Result<std::string> compress_frame(std::span<const std::byte> data, int level);

// Verifies the compressed bytes against `frame` (size, XXH3-128 digest), decompresses them
// with an output bound of frame.uncompressed_size, and verifies the size and the seek-table
// checksum. `frame_number` is for messages. Errors: kCorrupt.
Result<std::string> decode_frame_checked(const FrameInfo& frame, uint32_t frame_number, std::span<const std::byte> compressed);

}  // namespace lazycache::format
