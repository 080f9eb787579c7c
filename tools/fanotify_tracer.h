// SPDX-License-Identifier: MIT
// File: tools/fanotify_tracer.h -- the kernel side of `lazycache trace`: which files a job opens
// under the saved paths, from fanotify (fanotify(7); needs CAP_SYS_ADMIN).
//
// Design: one fanotify group, one mark per file system holding a traced path
// (FAN_MARK_FILESYSTEM, else FAN_MARK_MOUNT where the file system refuses it), for FAN_OPEN,
// FAN_CLOSE_WRITE and FAN_CLOSE_NOWRITE of files. No descriptor is kept per file: the only
// descriptors are the group's and the one the kernel opens for each event, which is read
// (readlink of /proc/self/fd/N gives its path) and closed at once. Opens outside the traced
// paths are dropped after that readlink, as are those of this process and of the ignored pids.
// A file seen read gets an inode ignore mark for reads (a mark, not a descriptor; the group has
// FAN_UNLIMITED_MARKS), so only its first open costs an event: 4x fewer events on three passes
// over the node fixture (docs/writable.md). The kernel clears it when the file is modified.
// Why not FAN_ACCESS: it comes once per read(2) call (many per file) and never for mmap (a
// loaded .so), while every read of a file follows an open; the closes tell a read-only open
// from a write (tools/trace_order.h). The queue is unlimited (FAN_UNLIMITED_QUEUE), so no open
// is lost however long the tracer is kept from reading; an overflow would be reported.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "common/posix_files.h"
#include "common/status.h"
#include "tools/trace_order.h"

namespace lazycache::cli {

// A traced path as the user named it (absolute) and with symlinks resolved (how the kernel names
// an open file). A path that does not exist yet is resolved through its nearest existing parent.
struct TracedPath {
  std::string shown, real;
};

class FanotifyTracer {
 public:
  // Errors: kPermissionDenied (no CAP_SYS_ADMIN), kUnsupported (a kernel without fanotify),
  // kIo naming the path whose file system could not be marked.
  static Result<FanotifyTracer> open(const std::vector<std::string>& abs_paths);

  // Events of `pid` are not recorded either (the command that started the tracer).
  void ignore_pid(pid_t pid) { ignored_.push_back(pid); }
  // Records until SIGTERM or SIGINT, which the caller must have blocked (they are taken through
  // a signalfd), or until `stop_fd` (a FIFO opened O_RDWR | O_NONBLOCK; -1: none) is readable;
  // SIGUSR1 writes the list as of now. Every event queued before the request is recorded.
  // Also ends, within 2 s, when the directory of `list_file` is removed (nobody can stop or use
  // the trace then), and after 24 hours.
  // Writes `list_file` (the shown paths, first read first, one per line) each time.
  Status serve(const std::string& list_file, int stop_fd);

  // Calls `on_event` (shown path, what happened) for every event under the traced paths, from
  // this thread, instead of keeping a list. Each time `control_fd` is readable, drains the queue
  // (every event queued before the control message is delivered first) and calls `on_control`;
  // returns when that answers false. Takes no signal. For a kernel overlay's open feed
  // (tools/overlay_open_feed.h): the daemon learns the job's opens.
  Status follow(int control_fd, const std::function<void(const std::string&, const FileEvent&)>& on_event,
                const std::function<bool()>& on_control);

  const std::vector<TracedPath>& paths() const { return paths_; }
  // Events read (the tracer's cost) and those under the traced paths, so far.
  uint64_t events() const { return events_; }
  uint64_t events_in_paths() const { return in_paths_; }

 private:
  void drain();
  void record(int event_fd, uint64_t mask);
  Status write_list(const std::string& list_file) const;

  UniqueFd fd_;
  std::vector<TracedPath> paths_;
  std::vector<pid_t> ignored_;
  TraceOrder order_;
  const std::function<void(const std::string&, const FileEvent&)>* on_event_ = nullptr;  // set during follow()
  uint64_t overflows_ = 0;
  uint64_t events_ = 0, in_paths_ = 0;
};

}  // namespace lazycache::cli
