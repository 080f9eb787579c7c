// SPDX-License-Identifier: MIT
// File: tools/cmd_restore.h -- `lazycache restore`'s options, and the mount it makes when FUSE
// is usable: typed MountOptions (tools/mount_options.h) from restore's parsed command line,
// handed to run_mount() in this process (no argv is built for mount to parse again).
#pragma once

#include "tools/command.h"
#include "tools/mount_options.h"

namespace lazycache::cli {

// Declares restore's options on `args` (call before args.parse()).
void add_restore_options(ArgParser& args);
// The mount `restore` makes from its parsed command line: mount's defaults, with restore's store
// options (its --memory-budget, when given, is the mount's frame memory; the upload budget of a
// later unmount --save stays mount's default), its key options, PATHs, --json and
// --fail-on-cache-miss. The same as `mount` parses from the same flags. kInvalidArgument as
// store_settings_from().
Result<MountOptions> restore_mount_options(const ArgParser& args);

}  // namespace lazycache::cli
