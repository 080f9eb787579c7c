// SPDX-License-Identifier: MIT
// `lazycache cat ARCHIVE PATH...`: write files' contents to stdout, reading only their frames.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/posix_files.h"
#include "tools/archive_input.h"
#include "tools/command.h"

namespace lazycache::cli {
namespace {

Status cat_file(const format::ArchiveReader& reader, const std::string& path) {
  const format::Index& idx = reader.index();
  auto id = idx.lookup_path(path);
  if (!id) return Status(ErrorCode::kNotFound, "'" + path + "' is not in the archive");
  format::Entry e = idx.entry(*id);
  if (e.type != format::EntryType::kRegular) return Status(ErrorCode::kInvalidArgument, "'" + path + "' is not a regular file");
  if (e.size == 0) return Status();
  // Frame by frame: each frame is read and decoded once, whatever the file size.
  auto [first, last] = idx.frames_for_range(e.data_offset, e.size);
  for (uint32_t fi = first; fi <= last; ++fi) {
    LC_ASSIGN_OR_RETURN(std::string data, reader.read_frame(fi));
    const format::FrameInfo& f = idx.frames()[fi];
    uint64_t from = std::max(e.data_offset, f.uncompressed_offset);
    uint64_t to = std::min(e.data_offset + e.size, f.uncompressed_offset + f.uncompressed_size);
    LC_RETURN_IF_ERROR(
        write_all(STDOUT_FILENO, std::string_view(data).substr(from - f.uncompressed_offset, to - from), "writing to stdout"));
  }
  return Status();
}

int run_cat(ArgParser& args) {
  add_archive_input_options(args);
  int code = 0;
  if (!args.parse(code)) return code;
  auto in = open_archive_input(args);
  if (!in.ok()) return report_error("cat", in.error());
  if (in->rest.empty()) return report_error("cat", Status(ErrorCode::kInvalidArgument, "no PATH given"));
  for (const auto& p : in->rest) {
    Status s = cat_file(*in->reader, p);
    if (!s.ok()) return report_error("cat", s);
  }
  return kExitOk;
}

const CommandRegistration reg{"cat", "write files from an archive to stdout", "[OPTIONS] ARCHIVE PATH...", run_cat};

}  // namespace
}  // namespace lazycache::cli
