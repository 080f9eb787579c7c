// SPDX-License-Identifier: MIT
// File: format/frame_codec.h -- one zstd data frame in, one out, with the checks the format
// requires. Each thread keeps its own contexts (thread_local), so both calls are thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
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
// The same into `out` (exactly frame.uncompressed_size bytes, contents on entry ignored): a caller
// that recycles its buffers pays neither the zero-fill nor the page faults of a fresh one per frame.
// `out` holds garbage after an error. Errors: kCorrupt, kInvalidArgument (wrong out size).
Status decode_frame_checked_into(const FrameInfo& frame, uint32_t frame_number, std::span<const std::byte> compressed,
                                 std::span<std::byte> out);
// decode_frame_checked_into() for bytes whose size and XXH3-128 digest the caller has just checked
// against `frame` (FrameSource::check: extract's pipeline reads every frame through it): the digest
// pass is not repeated (a second XXH3-128 over every compressed byte); the zstd magic, content
// size, decompression bound and seek-table checksum are still checked. Errors as above.
Status decode_digested_frame_into(const FrameInfo& frame, uint32_t frame_number, std::span<const std::byte> compressed,
                                  std::span<std::byte> out);

// decode_frame_checked() for frames too large to hold in memory at once (fs/ spills them to a
// file): the compressed bytes come in pieces, in order, and the decompressed bytes leave through
// `sink` in pieces of at most 1 MiB. Nothing the sink got may be trusted until finish() returns
// OK: the digest of the compressed bytes can only be checked once they are all in. Memory: the
// zstd window plus 1 MiB, whatever the frame size. Not thread-safe; one frame per decoder.
class FrameDecoder {
 public:
  using Sink = std::function<Status(std::span<const std::byte>)>;
  FrameDecoder(const FrameInfo& frame, uint32_t frame_number, Sink sink);
  ~FrameDecoder();
  FrameDecoder(const FrameDecoder&) = delete;
  FrameDecoder& operator=(const FrameDecoder&) = delete;

  // The next compressed bytes. Errors: kCorrupt, or the sink's error.
  Status feed(std::span<const std::byte> compressed);
  // Checks what feed() cannot: the compressed size and digest, the decompressed size, the
  // seek-table checksum. Errors: kCorrupt.
  Status finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace lazycache::format
