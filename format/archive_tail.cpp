// SPDX-License-Identifier: MIT
#include "format/archive_tail.h"

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "format/hashing.h"
#include "format/seek_table.h"

namespace lazycache::format {

Result<uint64_t> finish_archive(IndexModel& model, ByteSink& sink, int level, double* commit_seconds) {
  const auto& nodes = model.nodes;
  for (const auto& n : nodes) {
    if (n.type == EntryType::kRegular) {
      ++model.totals.file_count;
      if (&n == &nodes[n.link_group]) model.totals.file_bytes += n.size;
    } else if (n.type == EntryType::kDirectory) {
      if (&n != &nodes[0] && !n.implicit_dir) ++model.totals.dir_count;  // tar members only
    } else {
      ++model.totals.symlink_count;
    }
  }
  uint64_t compressed_offset = 0, uncompressed_offset = 0;
  for (const auto& f : model.frames) {
    compressed_offset += f.compressed_size;
    uncompressed_offset += f.uncompressed_size;
  }
  model.totals.uncompressed_bytes = uncompressed_offset;
  model.totals.compressed_bytes = compressed_offset;
  LC_ASSIGN_OR_RETURN(std::string raw_index, serialize_index(model));
  LC_ASSIGN_OR_RETURN(std::string index_frame, build_index_frame(raw_index, level));
  std::vector<SeekEntry> table;
  for (const auto& f : model.frames)
    table.push_back(SeekEntry{f.compressed_offset, f.compressed_size, f.uncompressed_offset, f.uncompressed_size, f.xxh64_low32});
  table.push_back(SeekEntry{compressed_offset, static_cast<uint32_t>(index_frame.size()), uncompressed_offset, 0, xxh64_low32({})});
  std::string seek_table = SeekTable::serialize(table);
  LC_RETURN_IF_ERROR(sink.write(std::as_bytes(std::span<const char>(index_frame))).with_context("writing the index"));
  LC_RETURN_IF_ERROR(sink.write(std::as_bytes(std::span<const char>(seek_table))).with_context("writing the seek table"));
  const auto commit_start = std::chrono::steady_clock::now();
  LC_RETURN_IF_ERROR(sink.commit().with_context("committing the archive"));
  if (commit_seconds) *commit_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - commit_start).count();
  return static_cast<uint64_t>(index_frame.size() + seek_table.size());
}

}  // namespace lazycache::format
