// SPDX-License-Identifier: MIT
// `lazycache pack -o FILE PATH...`: write an archive of local paths to a local file.
#include <fstream>
#include <iostream>

#include "common/byte_sink.h"
#include "format/archive_writer.h"
#include "tools/command.h"
#include "tools/progress.h"

namespace lazycache::cli {
namespace {

int run_pack(ArgParser& args) {
  args.option("output", "FILE", "archive to write (written to a temporary name, renamed when complete)");
  args.alias("-o", "output");
  args.option("level", "N", "zstd compression level, 1-22", "3");
  args.option("frame-size", "SIZE", "target uncompressed frame size (4K..512M)", "4M");
  args.option("threads", "N", "compression threads, 0 = all cores", "0");
  args.flag("xattrs", "store user., trusted. and security. extended attributes");
  args.option("hot-list", "FILE", "archive paths, one per line, written first and recorded as the hot list");
  args.flag("quiet", "no progress display and no summary");
  args.alias("-q", "quiet");
  int code = 0;
  if (!args.parse(code)) return code;
  if (!args.has("output")) return report_error("pack", Status(ErrorCode::kInvalidArgument, "-o FILE is required"));
  if (args.positionals().empty()) return report_error("pack", Status(ErrorCode::kInvalidArgument, "no PATH to pack"));

  format::PackConfig config;
  auto level = args.get_int("level");
  if (!level.ok()) return report_error("pack", level.error());
  auto frame = args.get_size("frame-size");
  if (!frame.ok()) return report_error("pack", frame.error());
  auto threads = args.get_int("threads");
  if (!threads.ok()) return report_error("pack", threads.error());
  if (*threads < 0 || *threads > 1024) return report_error("pack", Status(ErrorCode::kInvalidArgument, "--threads: expected 0..1024"));
  config.level = static_cast<int>(*level);
  config.frame_size_bytes = *frame;
  config.threads = static_cast<int>(*threads);
  config.xattrs = args.has("xattrs") ? format::XattrSet::kStored : format::XattrSet::kNone;
  config.tool_version = std::string("lazycache ") + LC_VERSION;
  if (args.has("hot-list")) {
    std::ifstream in(args.get("hot-list"));
    if (!in) return report_error("pack", errno_status("reading hot list " + args.get("hot-list")));
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) config.hot_paths.push_back(line);
  }
  std::vector<format::PackRoot> roots;
  for (const auto& p : args.positionals()) roots.push_back(format::PackRoot{p});

  bool quiet = args.has("quiet");
  Progress progress("pack", quiet);
  config.progress = [&](const format::PackProgress& p) {
    progress.update(p.files_done, p.files_total, p.bytes_in, p.bytes_in_total, "out " + human_bytes(p.bytes_out));
  };
  auto sink = LocalFileSink::create(args.get("output"));
  if (!sink.ok()) return report_error("pack", sink.error());
  auto stats = format::write_archive(roots, **sink, config);
  progress.finish();
  if (!stats.ok()) return report_error("pack", stats.error());
  if (!quiet) {
    double ratio = stats->archive_bytes ? static_cast<double>(stats->uncompressed_bytes) / static_cast<double>(stats->archive_bytes) : 0;
    std::fprintf(stderr, "packed %llu files, %llu dirs, %llu symlinks, %llu hardlinks (%s) into %s: %s, %u frames, ratio %.2f, %.2f s\n",
                 static_cast<unsigned long long>(stats->files), static_cast<unsigned long long>(stats->dirs),
                 static_cast<unsigned long long>(stats->symlinks), static_cast<unsigned long long>(stats->hardlinks),
                 human_bytes(stats->file_bytes).c_str(), args.get("output").c_str(), human_bytes(stats->archive_bytes).c_str(),
                 stats->frames, ratio, stats->seconds);
  }
  return kExitOk;
}

const CommandRegistration reg{"pack", "write an archive of local paths to a file", "-o FILE [OPTIONS] PATH...", run_pack};

}  // namespace
}  // namespace lazycache::cli
