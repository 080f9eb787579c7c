// SPDX-License-Identifier: MIT
#include "tools/extract_options.h"

#include <unistd.h>

#include "tools/store_options.h"

namespace lazycache::cli {

void add_extract_safety_options(ArgParser& args) {
  args.flag("no-external-symlinks",
            "refuse (before writing anything) symlinks whose target is absolute or resolves outside the extraction directory; "
            "by default they are created as saved, like tar, and never followed");
  args.flag("allow-external-symlinks", "create absolute and escaping symlinks as saved (the default)");
  args.multi("xattrs-include", "PATTERN", "also restore xattrs matching this glob, e.g. 'security.*' (default: user.* only; repeatable)");
}

void apply_extract_safety_options(const ArgParser& args, format::ExtractConfig& config) {
  config.external_symlinks = args.has("no-external-symlinks") ? format::ExtractConfig::ExternalSymlinks::kRefuse
                                                              : format::ExtractConfig::ExternalSymlinks::kCreate;
  config.xattrs_include = args.get_all("xattrs-include");
}

void add_extract_owner_options(ArgParser& args) {
  args.flag("same-owner", "restore uid/gid (default when run as root)");
  args.flag("no-same-owner", "do not restore uid/gid, even as root");
}

void apply_extract_owner_options(const ArgParser& args, format::ExtractConfig& config) {
  config.restore_owner = args.has("same-owner") || (::geteuid() == 0 && !args.has("no-same-owner"));
}

void add_extract_writer_option(ArgParser& args) {
  args.option("writers", "N", "threads creating and writing files in a new target (0: auto, 2 per CPU up to 8)", "0");
}

Status apply_extract_writer_option(const ArgParser& args, format::ExtractConfig& config) {
  LC_ASSIGN_OR_RETURN(int64_t writers, args.get_int("writers"));
  if (writers < 0 || writers > 64) return Status(ErrorCode::kInvalidArgument, "--writers: expected 0..64, got " + std::to_string(writers));
  config.writers = static_cast<int>(writers);
  return Status();
}

Status apply_extract_transfer_options(const ArgParser& args, format::ExtractConfig& config) {
  LC_ASSIGN_OR_RETURN(auto transfer, transfer_config_from(args));
  config.concurrency = transfer.concurrency;  // 0: auto
  config.part_size_bytes = transfer.part_size_bytes;
  config.max_inflight_bytes = transfer.memory_budget_bytes;
  return Status();
}

}  // namespace lazycache::cli
