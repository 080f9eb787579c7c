// SPDX-License-Identifier: MIT
// File: fs/tree_warmer.h -- TreeWarmer: lists a freshly mounted tree through the kernel, beside
// the job, so the kernel's name cache holds its entries before the job asks for them (issue 15).
//
// Why: a cold job through a FUSE mount pays a LOOKUP round trip to the daemon for every path
// component it touches first (node's partial job: 7,150 lookups, about a third of its cold
// overhead on a 2-core runner), and a file the kernel does not know yet when its frame is decoded
// cannot be handed to the page cache with it (Filesystem::add_page_cache_sink), so the job later
// reads it through the daemon. A READDIRPLUS reply makes a dentry and an inode for every entry it
// names, valid for the mount's entry timeout (a day), and marks its files known. So one listing
// of every directory, beside the daemon and not on the job's path, turns the job's
// lookups into name-cache hits and lets every decoded frame hand off all its files at once.
//
// How: first the directories `first` names (the learned hot list's, in the order the last job
// opened their files: the job about to run opens them in that order again), then depth first (in
// the archive's order) from the mount point, skipping those; one directory open at a time (by its
// path below the mount point: its parent was listed before, so resolving it sends nothing),
// getdents64 into a 64 KiB buffer, until every directory was listed or `max_entries` names were.
// It opens no file and reads no data: nothing is fetched, and the learned access order sees
// nothing. The listing runs in a process of its own (fs/tree_walk.h says why: a daemon killed
// while its own thread waited on its mount could never finish dying); this class starts it,
// counts its events and runs the hooks on a thread of the caller.
//
// A descriptor open under the mount point makes umount(2) fail with EBUSY while it is held, so
// `lazycache unmount` asks the daemon to stop the walk (tools/mount_daemon.h) and tries again;
// request_stop() kills the walk's process (a request of it the daemon is handling is answered
// first). A directory that is no longer on the mount (it was unmounted, so the path leads to what
// lies below) ends the walk too.
// Thread-safe: stats() and request_stop() may be called from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/posix_files.h"

namespace lazycache::fs {

struct TreeWarmStats {
  uint64_t entries = 0;      // names listed (not "." and "..")
  uint64_t directories = 0;  // directories listed
  uint64_t elapsed_ms = 0;   // from the start to the end of the walk, or until now while it runs
  bool active = false;       // still walking
};

// What the mount does as the walk goes (Filesystem's decode-ahead, fs/filesystem.h): each set is
// called on the thread that follows the walk.
struct TreeWarmHooks {
  // After each directory was listed: the kernel has made the inodes of every name in it by then
  // (its getdents returned), so their files may be handed to the page cache.
  std::function<void()> listed_directory;
  // Once, when the walk ends: `finished` when it ended by itself (everything listed, or the cap),
  // false when stopped or the mount went away.
  std::function<void(bool finished)> ended;
};

class TreeWarmer {
 public:
  // Starts walking `mountpoint` (absolute) from a thread of its own, `first` (paths below it, ""
  // for itself) before the rest. max_entries 0: nothing is walked. `hooks` run on that thread
  // (see TreeWarmHooks). With `root` (a descriptor of a mount's root, O_PATH will do) the walk
  // lists that mount instead (TreeWalkRequest::root_fd: a kernel overlay's detached lower
  // layer); it is closed here once the walk's process has its copy, so the mount is held by the
  // walk only while it runs, and `mountpoint` only names the walk.
  TreeWarmer(std::string mountpoint, uint64_t max_entries, std::vector<std::string> first = {}, TreeWarmHooks hooks = {},
             UniqueFd root = {});
  // Stops the walk and joins the thread.
  ~TreeWarmer();
  TreeWarmer(const TreeWarmer&) = delete;
  TreeWarmer& operator=(const TreeWarmer&) = delete;

  // Ends the walk (kills its process); returns at once.
  void request_stop() { thread_.request_stop(); }
  // Waits for the walk to end.
  void join();
  TreeWarmStats stats() const;

 private:
  // Starts the walk's process and follows it to its end; true when it finished by itself.
  bool run(const std::stop_token& stop);

  const std::string mountpoint_;
  const uint64_t max_entries_;
  const std::vector<std::string> first_;
  const TreeWarmHooks hooks_;
  std::atomic<uint64_t> entries_{0}, directories_{0}, elapsed_ms_{0};
  std::atomic<bool> active_{true};
  const int64_t started_ms_;
  std::mutex child_mu_;  // guards child_: no signal goes to a pid once it was reaped
  pid_t child_ = -1;     // the walk's process while it runs
  int socket_ = -1;      // its events
  UniqueFd root_;        // TreeWalkRequest::root_fd until the walk's process has it
  std::jthread thread_;  // last: it runs run(), which uses the members above
};

}  // namespace lazycache::fs
