// SPDX-License-Identifier: MIT
// ArchiveReader::open: one tail read (the last 256 KiB), at most one more for the seek table and
// index together, then both are validated and cross-checked.
#include <algorithm>
#include <cstring>

#include "format/archive.h"
#include "format/frame_codec.h"
#include "format/hashing.h"
#include "format/index_builder.h"
#include "format/le.h"
#include "format/quote.h"
#include "format/seek_table.h"

namespace lazycache::format {

namespace {

// 256 KiB holds the seek table of ~20,000 frames (80 GiB at 4 MiB frames) plus a typical
// compressed index of tens of thousands of files, so most archives open in one read.
constexpr uint64_t kTailReadBytes = 256 * 1024;

class ArchiveReaderImpl final : public ArchiveReader {
 public:
  ArchiveReaderImpl(std::shared_ptr<const ByteSource> source, std::shared_ptr<const Index> index)
      : source_(std::move(source)), index_(std::move(index)) {}

  const Index& index() const override { return *index_; }
  std::shared_ptr<const Index> shared_index() const override { return index_; }
  const ByteSource& source() const override { return *source_; }

  Result<std::string> decode_frame(uint32_t frame, std::span<const std::byte> compressed) const override {
    if (frame >= index_->frames().size()) return Status(ErrorCode::kInvalidArgument, "frame " + std::to_string(frame) + " out of range");
    return decode_frame_checked(index_->frames()[frame], frame, compressed);
  }

  Status decode_frame_into(uint32_t frame, std::span<const std::byte> compressed, std::span<std::byte> out) const override {
    if (frame >= index_->frames().size()) return Status(ErrorCode::kInvalidArgument, "frame " + std::to_string(frame) + " out of range");
    return decode_frame_checked_into(index_->frames()[frame], frame, compressed, out);
  }

  Result<std::string> read_frame(uint32_t frame) const override {
    if (frame >= index_->frames().size()) return Status(ErrorCode::kInvalidArgument, "frame " + std::to_string(frame) + " out of range");
    const FrameInfo& f = index_->frames()[frame];
    std::string buf(f.compressed_size, '\0');
    auto out = std::as_writable_bytes(std::span<char>(buf));
    LC_ASSIGN_OR_RETURN(size_t n, source_->read_at(f.compressed_offset, out));
    if (n != buf.size()) return Status(ErrorCode::kCorrupt, source_->describe() + ": frame " + std::to_string(frame) + " truncated");
    auto decoded = decode_frame(frame, out);
    if (!decoded.ok()) return decoded.error().with_context(source_->describe());
    return decoded;
  }

  Result<size_t> read_file(EntryId id, uint64_t offset, std::span<std::byte> out) const override {
    if (id >= index_->entry_count()) return Status(ErrorCode::kInvalidArgument, "entry out of range");
    Entry e = index_->entry(id);
    if (e.type != EntryType::kRegular) return Status(ErrorCode::kInvalidArgument, quote_path(index_->path(id)) + " is not a regular file");
    if (offset >= e.size || out.empty()) return size_t{0};
    uint64_t len = std::min<uint64_t>(out.size(), e.size - offset);
    uint64_t start = e.data_offset + offset;
    auto [first, last] = index_->frames_for_range(start, len);
    size_t done = 0;
    for (uint32_t fi = first; fi <= last; ++fi) {
      LC_ASSIGN_OR_RETURN(std::string data, read_frame(fi));
      const FrameInfo& f = index_->frames()[fi];
      uint64_t from = std::max(start + done, f.uncompressed_offset);
      uint64_t to = std::min(start + len, f.uncompressed_offset + f.uncompressed_size);
      if (to <= from) continue;
      std::memcpy(out.data() + (from - start), data.data() + (from - f.uncompressed_offset), to - from);
      done = to - start;
    }
    return static_cast<size_t>(len);
  }

 private:
  std::shared_ptr<const ByteSource> source_;
  std::shared_ptr<const Index> index_;
};

Status check_against_seek_table(const Index& index, const SeekTable& st) {
  const auto& sf = st.frames();
  auto frames = index.frames();
  if (frames.size() + 1 != sf.size())
    return Status(ErrorCode::kCorrupt,
                  "index lists " + std::to_string(frames.size()) + " data frames, the seek table " + std::to_string(sf.size() - 1));
  for (size_t i = 0; i < frames.size(); ++i) {
    const auto& a = frames[i];
    const auto& b = sf[i];
    if (a.compressed_offset != b.compressed_offset || a.compressed_size != b.compressed_size ||
        a.uncompressed_offset != b.uncompressed_offset || a.uncompressed_size != b.uncompressed_size || a.xxh64_low32 != b.xxh64_low32)
      return Status(ErrorCode::kCorrupt, "frame " + std::to_string(i) + " differs between the index and the seek table");
  }
  return Status();
}

}  // namespace

Result<std::unique_ptr<ArchiveReader>> ArchiveReader::open(std::shared_ptr<const ByteSource> source, uint64_t first_read_bytes) {
  const uint64_t size = source->size();
  const std::string what = source->describe();
  auto fail = [&](const Status& s) { return s.with_context(what); };
  if (size < kSeekTableFooterBytes)
    return fail(Status(ErrorCode::kCorrupt, "too small to be an archive (" + std::to_string(size) + " bytes)"));
  uint64_t tail_len = std::min(size, first_read_bytes > 0 ? first_read_bytes : kTailReadBytes);
  ByteBuffer tail(tail_len);  // the read fills it (a short read fails below)
  {
    auto r = source->read_at(size - tail_len, std::as_writable_bytes(std::span<char>(tail.data(), tail.size())));
    if (!r.ok()) return fail(r.error().with_context("reading the archive tail"));
    if (*r != tail_len) return fail(Status(ErrorCode::kCorrupt, "short read of the archive tail"));
  }
  auto tail_bytes = [&] { return std::as_bytes(std::span<const char>(tail.data(), tail.size())); };
  auto table_bytes = SeekTable::frame_bytes_from_footer(tail_bytes());
  if (!table_bytes.ok()) return fail(table_bytes.error());
  if (*table_bytes > size) return fail(Status(ErrorCode::kCorrupt, "seek table larger than the archive"));
  // The last seek-table entry (the index frame) sits just before the footer, always in the tail
  // when the table has at least one entry and the tail holds it.
  uint64_t needed = *table_bytes;
  if (*table_bytes >= 8 + kSeekTableEntryBytes + kSeekTableFooterBytes && tail_len >= kSeekTableEntryBytes + kSeekTableFooterBytes) {
    const std::byte* last = tail_bytes().data() + tail_len - kSeekTableFooterBytes - kSeekTableEntryBytes;
    uint64_t index_frame_bytes = load_le32(last);
    needed = std::min(size, *table_bytes + index_frame_bytes);
  }
  if (needed > tail_len) {
    // Second (and last) read: everything from the index frame to the start of the tail.
    ByteBuffer whole(needed);
    const uint64_t more = needed - tail_len;
    auto r = source->read_at(size - needed, std::as_writable_bytes(std::span<char>(whole.data(), more)));
    if (!r.ok()) return fail(r.error().with_context("reading the archive index"));
    if (*r != more) return fail(Status(ErrorCode::kCorrupt, "short read of the archive index"));
    std::memcpy(whole.data() + more, tail.data(), tail_len);
    tail = std::move(whole);
    tail_len = tail.size();
  }
  auto st = SeekTable::parse(tail_bytes(), size);
  if (!st.ok()) return fail(st.error());
  if (st->frames().empty()) return fail(Status(ErrorCode::kCorrupt, "seek table has no frames (no lazycache index)"));
  const SeekEntry& idx = st->frames().back();
  if (idx.uncompressed_size != 0) return fail(Status(ErrorCode::kCorrupt, "last frame before the seek table is not the index frame"));
  if (idx.xxh64_low32 != xxh64_low32({}))
    return fail(Status(ErrorCode::kCorrupt, "seek-table checksum of the index frame is not that of empty content"));
  uint64_t idx_start_in_tail = tail_len - st->table_frame_bytes() - idx.compressed_size;
  if (st->table_frame_bytes() + idx.compressed_size > tail_len)
    return fail(Status(ErrorCode::kCorrupt, "index frame not in the bytes read"));
  auto raw = unwrap_index_frame(tail_bytes().subspan(idx_start_in_tail, idx.compressed_size));
  if (!raw.ok()) return fail(raw.error());
  auto index = Index::parse(std::move(raw).value());
  if (!index.ok()) return fail(index.error());
  Status cross = check_against_seek_table(**index, *st);
  if (!cross.ok()) return fail(cross);
  return std::unique_ptr<ArchiveReader>(new ArchiveReaderImpl(std::move(source), std::move(index).value()));
}

}  // namespace lazycache::format
