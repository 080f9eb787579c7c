// SPDX-License-Identifier: MIT
// File: tools/unmount_discard.h -- what a plain `unmount` (no --save) does with the changes a job
// made through a writable mount: they go with the mount (see docs/writable.md).
#pragma once

#include <string>
#include <vector>

namespace lazycache::cli {

// For each of `unmounted` (mount points whose unmount succeeded, their daemons done with them)
// that has a save record with an overlay state directory: removes the directory when mount made
// it itself (CACHE_DIR/../upper/mount-<pid>[/N]), says so on stderr when the job had changed
// something there, and keeps one the user named with --upper-dir (saying where it is). The
// record itself goes with the daemon's other files (run_dir_cleanup.h).
void discard_unsaved_changes(const std::vector<std::string>& unmounted);

}  // namespace lazycache::cli
