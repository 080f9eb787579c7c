// SPDX-License-Identifier: MIT
// File: tools/overlay_open_feed.h -- the job's opens on kernel overlays (tools/kernel_overlay.h),
// fed to the Filesystem from fanotify. Under an overlay the FUSE mount has zero-message opens, so
// the daemon never sees an OPEN; without this feed the access list (the learned hot-first layout
// of the next save) and the locality prefetch of a directory's files would follow only the
// files read through the daemon, which the page-cache hand-off makes few.
// The fanotify group lives in a helper process (common/helper_process.h), not on a thread of
// the daemon: each event comes with a descriptor of the opened file, and its close sends a FLUSH
// to the daemon's own FUSE mount below the overlay; a daemon killed while handling that request
// could never finish dying if the closer were one of its threads (docs/mount.md). The helper
// (tools/fanotify_tracer.h; needs CAP_SYS_ADMIN, as the overlay does; no descriptor kept per
// file) sends the path of each open under the mount points; a thread of the daemon maps it to
// its archive entry and gives it to Filesystem::note_open. Opens of files the job created are
// not the archive's and find no entry.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/posix_files.h"
#include "common/status.h"
#include "fs/filesystem.h"

namespace lazycache::cli {

class OverlayOpenFeed {
 public:
  struct Root {
    std::string mountpoint;    // absolute, where the overlay is mounted
    std::string archive_root;  // archive path of the directory mounted there ("" for the archive's root)
  };
  // Starts following the opens under `roots` (its helper process and a thread that hands them
  // over). `fs` must outlive the feed. Errors: FanotifyTracer::open's (kPermissionDenied,
  // kUnsupported, kIo), kIo when the helper cannot be started or ends before it follows.
  static Result<std::unique_ptr<OverlayOpenFeed>> start(fs::Filesystem& fs, std::vector<Root> roots);
  // Returns once every open made before the call has reached the Filesystem (the access list is
  // then complete as of now), or after 1 s.
  void flush();
  // Stops after the events queued so far (the helper is killed if it has not ended within 2 s)
  // and joins the thread.
  ~OverlayOpenFeed();
  OverlayOpenFeed(const OverlayOpenFeed&) = delete;
  OverlayOpenFeed& operator=(const OverlayOpenFeed&) = delete;

 private:
  OverlayOpenFeed() = default;
  void receive(fs::Filesystem& fs, const std::vector<Root>& roots);  // the thread: until the helper's end

  UniqueFd socket_;  // ours of the socket pair with the helper
  pid_t helper_ = -1;
  std::mutex mu_;  // guards what follows
  std::condition_variable changed_;
  uint64_t flushes_ = 0;  // flush answers received
  bool ended_ = false;    // the helper's end of the socket closed
  std::jthread thread_;
};

}  // namespace lazycache::cli
