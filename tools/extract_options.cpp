// SPDX-License-Identifier: MIT
#include "tools/extract_options.h"

namespace lazycache::cli {

void add_extract_safety_options(ArgParser& args) {
  args.flag("no-external-symlinks",
            "refuse (before writing anything) symlinks whose target is absolute or resolves outside the extraction directory; "
            "by default they are created as saved, like tar, and never followed");
  args.flag("allow-external-symlinks", "create absolute and escaping symlinks as saved (the default)");
  args.multi("xattrs-include", "PATTERN",
             "also restore xattrs matching this glob, e.g. 'security.*' (default: user.* only; repeatable)");
}

void apply_extract_safety_options(const ArgParser& args, format::ExtractConfig& config) {
  config.external_symlinks = args.has("no-external-symlinks") ? format::ExtractConfig::ExternalSymlinks::kRefuse
                                                              : format::ExtractConfig::ExternalSymlinks::kCreate;
  config.xattrs_include = args.get_all("xattrs-include");
}

}  // namespace lazycache::cli
