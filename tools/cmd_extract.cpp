// SPDX-License-Identifier: MIT
// `lazycache extract ARCHIVE [-C DIR] [PATH...]`: restore files from an archive, safely.
#include <cstdio>

#include "format/extractor.h"
#include "tools/archive_input.h"
#include "tools/command.h"
#include "tools/extract_options.h"
#include "tools/progress.h"

namespace lazycache::cli {
namespace {

int run_extract(ArgParser& args) {
  add_archive_input_options(args);
  args.option("directory", "DIR", "extract under DIR", ".");
  args.alias("-C", "directory");
  args.flag("to-original-paths", "put each root back at the absolute path it was packed from (ignores -C)");
  add_extract_safety_options(args);
  add_extract_owner_options(args);
  args.option("threads", "N", "decompression threads, 0 = all cores", "0");
  add_extract_writer_option(args);
  args.flag("quiet", "no progress display and no summary");
  args.alias("-q", "quiet");
  int code = 0;
  if (!args.parse(code)) return code;
  auto in = open_archive_input(args);
  if (!in.ok()) return report_error("extract", in.error());
  auto threads = args.get_int("threads");
  if (!threads.ok()) return report_error("extract", threads.error());
  if (*threads < 0 || *threads > 1024) return report_error("extract", Status(ErrorCode::kInvalidArgument, "--threads: expected 0..1024"));
  const auto& idx = in->reader->index();
  format::ExtractConfig config;
  config.targets = args.has("to-original-paths") ? format::targets_at_original_paths(idx)
                                                 : format::targets_under(idx, args.get("directory"));
  config.only_paths = in->rest;
  config.threads = static_cast<int>(*threads);
  apply_extract_safety_options(args, config);
  if (Status s = apply_extract_transfer_options(args, config); !s.ok()) return report_error("extract", s);
  if (Status s = apply_extract_writer_option(args, config); !s.ok()) return report_error("extract", s);
  apply_extract_owner_options(args, config);
  bool quiet = args.has("quiet");
  Progress progress("extract", quiet);
  config.progress = [&](const format::ExtractProgress& p) { progress.update(p.files_done, p.files_total, p.bytes_done, p.bytes_total); };
  auto stats = format::extract_archive(*in->reader, config);
  progress.finish();
  if (!stats.ok()) return report_error("extract", stats.error());
  if (!quiet)
    std::fprintf(stderr, "extracted %llu files, %llu dirs, %llu symlinks, %llu hardlinks (%s) from %u frames (%s read) in %.2f s\n",
                 static_cast<unsigned long long>(stats->files), static_cast<unsigned long long>(stats->dirs),
                 static_cast<unsigned long long>(stats->symlinks), static_cast<unsigned long long>(stats->hardlinks),
                 human_bytes(stats->file_bytes).c_str(), stats->frames_read, human_bytes(stats->compressed_bytes_read).c_str(),
                 stats->seconds);
  return kExitOk;
}

const CommandRegistration reg{"extract", "restore files from an archive (safely: nothing outside the target)",
                              "[OPTIONS] ARCHIVE [PATH...]", run_extract};

}  // namespace
}  // namespace lazycache::cli
