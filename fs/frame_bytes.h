// SPDX-License-Identifier: MIT
// File: fs/frame_bytes.h -- FrameBytes: the buffer a decompressed frame (or a slice of one) lives
// in (common/byte_buffer.h: resize() leaves new bytes uninitialised), and FramePtr, the shared
// handle readers, the in-memory cache and the page-cache hand-off hold it by. Whoever grows a
// buffer writes all of it before anyone reads (FrameBuffers decodes into it; spill and
// upper-file reads pread into it and shrink to what they got).
#pragma once

#include <memory>

#include "common/byte_buffer.h"

namespace lazycache::fs {

using FrameBytes = ByteBuffer;
using FramePtr = std::shared_ptr<const FrameBytes>;

}  // namespace lazycache::fs
