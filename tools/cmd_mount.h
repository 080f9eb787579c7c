// SPDX-License-Identifier: MIT
// File: tools/cmd_mount.h -- `lazycache mount` from typed options (tools/mount_options.h): what
// the mount command runs once its command line is parsed, and what `restore` runs when it mounts.
#pragma once

#include "tools/mount_options.h"

namespace lazycache::cli {

// Mounts `options.paths` (each saved path of the entry at its place) and, unless --foreground,
// leaves a daemon serving them; the calling process returns once they serve (exit code 0) or
// with the failure's code (the daemon then has exited). With --foreground it serves until the
// mounts end. A miss: the paths are left plain directories (exit 0, 3 with fail_on_cache_miss).
int run_mount(const MountOptions& options);

}  // namespace lazycache::cli
