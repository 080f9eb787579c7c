// SPDX-License-Identifier: MIT
// File: format/seek_table.h -- the zstd seekable format's seek table (spec v0.1.0), written and
// parsed from untrusted bytes.
//
// Layout (all little-endian), always the last frame of the object:
//   u32 0x184D2A5E | u32 Frame_Size = N*12 + 9 | N x {u32 c_size, u32 d_size, u32 xxh64_low32}
//   | u32 N | u8 descriptor (bit 7 checksum flag; bits 6-2 reserved, must be 0) | u32 0x8F92EAB1
// lazycache always writes the checksum flag and requires it when reading.
// Immutable after parse; safe to share between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace lazycache::format {

inline constexpr uint32_t kZstdFrameMagic = 0xFD2FB528;
inline constexpr uint32_t kSeekTableSkippableMagic = 0x184D2A5E;
inline constexpr uint32_t kSeekableFooterMagic = 0x8F92EAB1;
inline constexpr uint32_t kSkippableMagicMask = 0xFFFFFFF0;
inline constexpr uint32_t kSkippableMagicBase = 0x184D2A50;
inline constexpr uint32_t kSeekTableFooterBytes = 9;
inline constexpr uint32_t kSeekTableEntryBytes = 12;  // with checksums
// The reference implementation's ZSTD_SEEKABLE_MAXFRAMES.
inline constexpr uint64_t kMaxSeekableFrames = 0x8000000;
// zstd >= 1.5.5's ZSTD_SEEKABLE_MAX_FRAME_DECOMPRESSED_SIZE: refuse bigger frames before allocating.
inline constexpr uint64_t kMaxFrameUncompressedBytes = 1ull << 30;

struct SeekEntry {
  uint64_t compressed_offset = 0;  // prefix sum of earlier compressed sizes
  uint32_t compressed_size = 0;
  uint64_t uncompressed_offset = 0;  // prefix sum of earlier uncompressed sizes
  uint32_t uncompressed_size = 0;
  uint32_t xxh64_low32 = 0;
};

class SeekTable {
 public:
  // How many bytes at the end of the object hold the seek-table frame, from the 9-byte footer at
  // the end of `tail_end` (the last bytes of the object; at least 9). Errors: kCorrupt.
  static Result<uint64_t> frame_bytes_from_footer(std::span<const std::byte> tail_end);

  // Parses the seek table from `tail`, the last tail.size() bytes of an object of `object_size`
  // bytes; the tail must hold the whole seek-table frame. Validates magic numbers, reserved
  // bits, the checksum flag, N against kMaxSeekableFrames and the object size, per-frame sizes
  // (<= kMaxFrameUncompressedBytes) and that the frames plus the table exactly fill the object.
  // Errors: kCorrupt (with what failed), kUnsupported (no checksums).
  static Result<SeekTable> parse(std::span<const std::byte> tail, uint64_t object_size);

  // Serialises a seek table for the given frames (their offsets are ignored; sizes are used).
  static std::string serialize(std::span<const SeekEntry> frames);

  const std::vector<SeekEntry>& frames() const { return frames_; }
  uint64_t table_frame_bytes() const { return table_frame_bytes_; }
  // Sum of all frames' uncompressed sizes.
  uint64_t uncompressed_bytes() const;

 private:
  std::vector<SeekEntry> frames_;
  uint64_t table_frame_bytes_ = 0;
};

}  // namespace lazycache::format
