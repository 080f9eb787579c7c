// SPDX-License-Identifier: MIT
#include "format/seek_table.h"

#include "format/le.h"

namespace lazycache::format {

namespace {
Status corrupt(const std::string& what) { return Status(ErrorCode::kCorrupt, "seek table: " + what); }
}  // namespace

Result<uint64_t> SeekTable::frame_bytes_from_footer(std::span<const std::byte> tail_end) {
  if (tail_end.size() < kSeekTableFooterBytes) return corrupt("object shorter than the 9-byte footer");
  const std::byte* footer = tail_end.data() + tail_end.size() - kSeekTableFooterBytes;
  if (load_le32(footer + 5) != kSeekableFooterMagic) return corrupt("footer magic is not 0x8F92EAB1 (not a seekable zstd archive)");
  uint8_t descriptor = std::to_integer<uint8_t>(footer[4]);
  if ((descriptor & 0x7C) != 0) return corrupt("reserved descriptor bits set");
  if ((descriptor & 0x80) == 0) return Status(ErrorCode::kUnsupported, "seek table: no per-frame checksums (lazycache requires them)");
  uint64_t n = load_le32(footer);
  if (n > kMaxSeekableFrames) return corrupt("frame count " + std::to_string(n) + " above the limit");
  return 8 + n * kSeekTableEntryBytes + kSeekTableFooterBytes;
}

Result<SeekTable> SeekTable::parse(std::span<const std::byte> tail, uint64_t object_size) {
  if (tail.size() > object_size) return corrupt("tail longer than the object");
  LC_ASSIGN_OR_RETURN(uint64_t table_bytes, frame_bytes_from_footer(tail));
  if (table_bytes > object_size)
    return corrupt("table of " + std::to_string(table_bytes) + " bytes in an object of " + std::to_string(object_size));
  if (table_bytes > tail.size()) return corrupt("table not inside the bytes read");
  const std::byte* table = tail.data() + (tail.size() - table_bytes);
  if (load_le32(table) != kSeekTableSkippableMagic) return corrupt("skippable magic is not 0x184D2A5E");
  if (uint64_t{load_le32(table + 4)} + 8 != table_bytes) return corrupt("Frame_Size does not match the frame count");
  uint64_t n = (table_bytes - 8 - kSeekTableFooterBytes) / kSeekTableEntryBytes;
  SeekTable st;
  st.table_frame_bytes_ = table_bytes;
  st.frames_.reserve(n);
  uint64_t compressed = 0, uncompressed = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const std::byte* e = table + 8 + i * kSeekTableEntryBytes;
    SeekEntry f;
    f.compressed_size = load_le32(e);
    f.uncompressed_size = load_le32(e + 4);
    f.xxh64_low32 = load_le32(e + 8);
    f.compressed_offset = compressed;
    f.uncompressed_offset = uncompressed;
    if (f.compressed_size == 0) return corrupt("frame " + std::to_string(i) + " has compressed size 0");
    if (f.uncompressed_size > kMaxFrameUncompressedBytes)
      return corrupt("frame " + std::to_string(i) + " decompresses to " + std::to_string(f.uncompressed_size) +
                     " bytes, above the 1 GiB limit");
    compressed += f.compressed_size;  // u64 sums of u32 values: cannot overflow for n <= 2^27
    uncompressed += f.uncompressed_size;
    if (compressed > object_size) return corrupt("frames extend past the end of the object");
    st.frames_.push_back(f);
  }
  if (compressed + table_bytes != object_size)
    return corrupt("frames (" + std::to_string(compressed) + " bytes) plus table (" + std::to_string(table_bytes) +
                   ") do not equal the object size " + std::to_string(object_size));
  return st;
}

std::string SeekTable::serialize(std::span<const SeekEntry> frames) {
  std::string out;
  uint64_t payload = frames.size() * kSeekTableEntryBytes + kSeekTableFooterBytes;
  out.reserve(8 + payload);
  put_le32(out, kSeekTableSkippableMagic);
  put_le32(out, static_cast<uint32_t>(payload));
  for (const auto& f : frames) {
    put_le32(out, f.compressed_size);
    put_le32(out, f.uncompressed_size);
    put_le32(out, f.xxh64_low32);
  }
  put_le32(out, static_cast<uint32_t>(frames.size()));
  out.push_back(static_cast<char>(0x80));
  put_le32(out, kSeekableFooterMagic);
  return out;
}

uint64_t SeekTable::uncompressed_bytes() const {
  return frames_.empty() ? 0 : frames_.back().uncompressed_offset + frames_.back().uncompressed_size;
}

}  // namespace lazycache::format
