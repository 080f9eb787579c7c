// SPDX-License-Identifier: MIT
// `lazycache info ARCHIVE`: what the tail says about an archive (no frame is read).
#include <cstdio>

#include "format/quote.h"
#include "tools/archive_input.h"
#include "tools/command.h"
#include "tools/progress.h"

namespace lazycache::cli {
namespace {

int run_info(ArgParser& args) {
  add_archive_input_options(args);
  int code = 0;
  if (!args.parse(code)) return code;
  auto in = open_archive_input(args);
  if (!in.ok()) return report_error("info", in.error());
  const format::Index& idx = in->reader->index();
  const auto& t = idx.totals();
  uint64_t archive = in->reader->source().size();
  uint32_t max_frame = 0;
  for (const auto& f : idx.frames()) max_frame = std::max(max_frame, f.uncompressed_size);
  std::printf("archive:        %s\n", in->reader->source().describe().c_str());
  std::printf("size:           %llu (%s)\n", static_cast<unsigned long long>(archive), human_bytes(archive).c_str());
  // Version 2 is the one with member offsets (docs/archive-format.md).
  std::printf("format:         lazycache index v%d, seekable zstd v0.1.0 with checksums\n", idx.member_offset(0).has_value() ? 2 : 1);
  std::printf("written by:     %s\n", format::quote_path_if_needed(idx.tool_version()).c_str());
  std::printf("entries:        %u (%llu files, %llu directories, %llu symlinks)\n", idx.entry_count(),
              static_cast<unsigned long long>(t.file_count), static_cast<unsigned long long>(t.dir_count),
              static_cast<unsigned long long>(t.symlink_count));
  std::printf("file bytes:     %llu (%s)\n", static_cast<unsigned long long>(t.file_bytes), human_bytes(t.file_bytes).c_str());
  std::printf("tar stream:     %llu (%s)\n", static_cast<unsigned long long>(t.uncompressed_bytes),
              human_bytes(t.uncompressed_bytes).c_str());
  std::printf("data frames:    %zu (largest %s), %s compressed, ratio %.2f\n", idx.frames().size(), human_bytes(max_frame).c_str(),
              human_bytes(t.compressed_bytes).c_str(),
              t.compressed_bytes ? static_cast<double>(t.uncompressed_bytes) / static_cast<double>(t.compressed_bytes) : 0.0);
  std::printf("index + table:  %s\n", human_bytes(archive - t.compressed_bytes).c_str());
  std::printf("hot list:       %zu files\n", idx.hot_list().size());
  if (!idx.dead_members().empty()) {
    uint64_t dead = 0;
    for (const auto& d : idx.dead_members()) dead += d.length;
    std::printf("dead members:   %zu (%s, %.1f%% of the tar stream; superseded by later members)\n", idx.dead_members().size(),
                human_bytes(dead).c_str(),
                t.uncompressed_bytes ? 100.0 * static_cast<double>(dead) / static_cast<double>(t.uncompressed_bytes) : 0.0);
  }
  std::printf("roots:\n");
  // Root paths and prefixes come from the archive: quoted when they hold control bytes.
  for (const auto& r : idx.roots())
    std::printf("  %s  (member %s)\n", format::quote_path_if_needed(r.original_path).c_str(),
                format::quote_path_if_needed(r.member_prefix).c_str());
  return kExitOk;
}

const CommandRegistration reg{"info", "summarise an archive from its index", "[OPTIONS] ARCHIVE", run_info};

}  // namespace
}  // namespace lazycache::cli
