// SPDX-License-Identifier: MIT
// `lazycache verify ARCHIVE`: read everything and check it against the index.
#include <cstdio>

#include "format/verify.h"
#include "tools/archive_input.h"
#include "tools/command.h"
#include "tools/progress.h"

namespace lazycache::cli {
namespace {

int run_verify(ArgParser& args) {
  add_archive_input_options(args);
  args.flag("quiet", "no progress display and no summary");
  args.alias("-q", "quiet");
  int code = 0;
  if (!args.parse(code)) return code;
  auto in = open_archive_input(args);
  if (!in.ok()) return report_error("verify", in.error());
  const auto& idx = in->reader->index();
  Progress progress("verify", args.has("quiet"));
  auto n = static_cast<uint64_t>(idx.frames().size());
  auto stats = format::verify_archive(
      *in->reader, [&](uint32_t done) { progress.update(0, 0, 0, 0, "frame " + std::to_string(done) + "/" + std::to_string(n)); });
  progress.finish();
  if (!stats.ok()) return report_error("verify", stats.error());
  if (!args.has("quiet"))
    std::printf("ok: %u frames, %llu tar members, %s of tar stream verified\n", stats->frames,
                static_cast<unsigned long long>(stats->members), human_bytes(stats->uncompressed_bytes).c_str());
  return kExitOk;
}

const CommandRegistration reg{"verify", "check every frame and member of an archive against its index", "[OPTIONS] ARCHIVE", run_verify};

}  // namespace
}  // namespace lazycache::cli
