// SPDX-License-Identifier: MIT
// File: tools/extract_options.h -- the extraction safety options `extract` and `restore --extract`
// share (symlink policy, which xattrs), so both commands accept and mean the same.
#pragma once

#include "format/extractor.h"
#include "tools/command.h"

namespace lazycache::cli {

// --no-external-symlinks, --allow-external-symlinks (the default, kept for old scripts) and
// --xattrs-include PATTERN (repeatable).
void add_extract_safety_options(ArgParser& args);
void apply_extract_safety_options(const ArgParser& args, format::ExtractConfig& config);

}  // namespace lazycache::cli
