// SPDX-License-Identifier: MIT
// File: tools/overlay_open_feed.h -- the job's opens on kernel overlays (tools/kernel_overlay.h),
// fed to the Filesystem from fanotify. Under an overlay the FUSE mount has zero-message opens, so
// the daemon never sees an OPEN; without this feed the access list (the learned hot-first layout
// of the next save) and the locality prefetch of a directory's files would follow only the
// files read through the daemon, which the page-cache hand-off makes few.
// One thread, one fanotify group (tools/fanotify_tracer.h; needs CAP_SYS_ADMIN, as the overlay
// does), no descriptor kept per file; each open under a mount point is mapped to its archive
// entry and given to Filesystem::note_open. Opens of files the job created are not the
// archive's and find no entry.
#pragma once

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
  // Starts following the opens under `roots` on its own thread. `fs` must outlive the feed.
  // Errors: FanotifyTracer::open's (kPermissionDenied, kUnsupported, kIo).
  static Result<std::unique_ptr<OverlayOpenFeed>> start(fs::Filesystem& fs, std::vector<Root> roots);
  // Returns once every open made before the call has reached the Filesystem (the access list is
  // then complete as of now), or after 1 s.
  void flush();
  // Stops after the events queued so far and joins the thread.
  ~OverlayOpenFeed();
  OverlayOpenFeed(const OverlayOpenFeed&) = delete;
  OverlayOpenFeed& operator=(const OverlayOpenFeed&) = delete;

 private:
  OverlayOpenFeed() = default;
  UniqueFd stop_;   // eventfd: written by the destructor
  UniqueFd flush_;  // eventfd: written by flush()
  std::mutex mu_;   // guards flushes_
  std::condition_variable flushed_;
  uint64_t flushes_ = 0;  // flush requests the thread has served
  std::jthread thread_;
};

}  // namespace lazycache::cli
