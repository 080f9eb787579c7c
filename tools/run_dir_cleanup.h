// SPDX-License-Identifier: MIT
// File: tools/run_dir_cleanup.h -- removing what finished mounts left in the run directory.
//
// A mount daemon leaves RUN_DIR/mount-<pid>.state, .access, .access.live and .log, and `mount`
// a save record (save-<path>.info) naming the daemon's pid. Once the daemon has finished (its
// state says stopped) and none of its mount points is still mounted, nothing reads them again
// (`unmount --save` reads them while the path is mounted), so they are removed: by `unmount`
// after the daemon exits, and by `mount`, `status` and `unmount` for daemons that ended
// otherwise (a foreground mount's Ctrl-C, an external fusermount3 -u). A killed daemon (no
// "stopped") is stale: status and unmount report it and clean_stale() removes its files (and
// detaches its mount point first). A log with something in it is kept (it says what went
// wrong); an empty one goes, also one whose daemon never wrote a state file (a miss). Records of
// misses (pid 0: no daemon) stay for `unmount --save`.
#pragma once

#include <cstddef>

#include "tools/mount_state.h"

namespace lazycache::cli {

// True when `d` says stopped and none of its mount points is a lazycache mount any more.
bool mount_finished(const DaemonState& d);
// Removes d's state file, access lists, empty log, and the save records naming its pid.
void remove_daemon_files(const DaemonState& d);
// remove_daemon_files() for every finished daemon in run_dir(). Returns how many.
size_t clean_finished_mounts();

}  // namespace lazycache::cli
