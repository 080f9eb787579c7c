// SPDX-License-Identifier: MIT
#include "tools/save_options.h"

#include "tools/mount_state.h"

namespace lazycache::cli {

void add_save_options(ArgParser& args) {
  add_store_options(args);
  add_key_options(args, /*with_restore_keys=*/false);
  args.option("level", "N", "zstd level", "3");
  args.option("frame-size", "SIZE", "target uncompressed frame size", "4M");
  args.option("threads", "N", "compression threads (0: one per CPU)", "0");
  args.flag("xattrs", "store extended attributes");
  args.flag("json", "print one JSON object (docs/cli.md) instead of the summary line");
  args.flag("quiet", "no progress and no summary (errors still go to stderr)");
  args.alias("-q", "quiet");
  args.flag("no-trace", "ignore a `lazycache trace` of PATHs (by default it is stopped and the files the job read go first)");
}

Result<SaveOptions> parse_save_options(const ArgParser& args) {
  SaveOptions o;
  o.key = args.get("key");
  if (o.key.empty()) return Status(ErrorCode::kInvalidArgument, "--key is required");
  if (args.positionals().empty()) return Status(ErrorCode::kInvalidArgument, "no PATH to save");
  o.scope = args.get("scope");
  // The naming rule of every cache command: a member is named by its absolute path, whatever
  // the current directory.
  for (const auto& p : args.positionals()) o.paths.push_back(absolute_path(p));
  LC_ASSIGN_OR_RETURN(int64_t level, args.get_int("level"));
  LC_ASSIGN_OR_RETURN(o.frame_size_bytes, args.get_size("frame-size"));
  LC_ASSIGN_OR_RETURN(int64_t threads, args.get_int("threads"));
  o.level = static_cast<int>(level);
  o.threads = static_cast<int>(threads);
  o.xattrs = args.has("xattrs") ? format::XattrSet::kStored : format::XattrSet::kNone;
  o.json = args.has("json");
  o.quiet = args.has("quiet");
  o.no_trace = args.has("no-trace");
  LC_ASSIGN_OR_RETURN(o.store, store_settings_from(args));
  LC_RETURN_IF_ERROR(check_upload_part_size(o.store.transfer));
  return o;
}

}  // namespace lazycache::cli
