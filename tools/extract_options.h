// SPDX-License-Identifier: MIT
// File: tools/extract_options.h -- the extraction options `extract` and `restore --extract` share
// (symlink policy, which xattrs, the range-read plan), so both commands accept and mean the same.
#pragma once

#include "format/extractor.h"
#include "tools/command.h"

namespace lazycache::cli {

// --no-external-symlinks, --allow-external-symlinks (the default, kept for old scripts) and
// --xattrs-include PATTERN (repeatable).
void add_extract_safety_options(ArgParser& args);
void apply_extract_safety_options(const ArgParser& args, format::ExtractConfig& config);

// --same-owner and --no-same-owner: uid/gid restored when asked, and by default when run as root
// (like GNU tar), for `extract` and `restore --extract` alike.
void add_extract_owner_options(ArgParser& args);
void apply_extract_owner_options(const ArgParser& args, format::ExtractConfig& config);

// --writers N: file-writer threads (format::ExtractConfig::writers; 0 = auto, 1 = one thread).
void add_extract_writer_option(ArgParser& args);
Status apply_extract_writer_option(const ArgParser& args, format::ExtractConfig& config);

// The range-read plan from the store options both commands take (tools/store_options.h):
// --concurrency N (simultaneous range reads), --part-size SIZE (bytes per read) and
// --memory-budget SIZE (compressed + decoded bytes held at once); `auto` leaves the choice to
// format::choose_fetch_plan(). Errors: kInvalidArgument for a bad value.
Status apply_extract_transfer_options(const ArgParser& args, format::ExtractConfig& config);

}  // namespace lazycache::cli
