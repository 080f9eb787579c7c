// SPDX-License-Identifier: MIT
// File: fs/tree_walk.h -- the listing behind fs/tree_warmer.h, run in a process of its own.
//
// Why a process: the walk sends requests to the mount of the very daemon that starts it. On a
// thread of the daemon, a SIGKILL of the daemon while one of those requests was being handled
// left that thread waiting in the kernel, uninterruptibly, for an answer only the dead process
// could give (a request already read by the daemon is waited out even by a killed task); so the
// process never finished dying, /dev/fuse was never closed, and the mount hung for good (seen as
// stale_daemon_test's zombie case timing out, session 36). A walk in another process only waits
// on the daemon: when the daemon dies, its device closes, the connection is aborted and the
// walk's request fails, and the walk is killed with it (PR_SET_PDEATHSIG).
//
// The child is a helper process (common/helper_process.h: a fresh image of this executable) with
// no descriptor of the caller but one socket: the request comes in on it, one event per listed
// directory goes out on it, and the exit code says how the walk ended.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace lazycache::fs {

struct TreeWalkRequest {
  // What to walk: the mount at `mountpoint` (absolute), or, with `root_fd` >= 0, the mount this
  // descriptor (O_PATH will do) is the root of: a kernel overlay's lower layer, detached, so no
  // path reaches it (tools/kernel_overlay.h). The walk's process gets a copy and holds the mount
  // only while it runs; a detached mount then stays alive until the walk ends or is killed.
  std::string mountpoint;
  int root_fd = -1;
  uint64_t max_entries = 0;        // the walk ends once it has listed this many names
  std::vector<std::string> first;  // directories below the mount point to list before the rest
};

// The exit codes of a walk's process.
constexpr int kTreeWalkFinished = 0;  // every directory listed, or the cap reached
constexpr int kTreeWalkEnded = 1;     // the mount went away (or the request was unreadable)

// What the process sends after each directory it listed: the kernel has made the inodes of
// every name in it by then (its getdents64 returned).
struct TreeWalkEvent {
  uint32_t entries = 0;  // names in the directory, not "." and ".."
};

// A started walk: its process, and the caller's end of the socket (events to read; already
// closed for writing, the request sent). pid -1: it could not be started.
struct TreeWalkProcess {
  pid_t pid = -1;
  int socket = -1;
};

// Starts the walk. The calling thread must outlive the process: the process is killed when the
// thread that started it ends (PR_SET_PDEATHSIG), so a walk never outlives its daemon.
TreeWalkProcess spawn_tree_walk(const TreeWalkRequest& request);

}  // namespace lazycache::fs
