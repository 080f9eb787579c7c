// SPDX-License-Identifier: MIT
#include "tools/overlay_open_feed.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <iostream>

#include "tools/fanotify_tracer.h"

namespace lazycache::cli {

Result<std::unique_ptr<OverlayOpenFeed>> OverlayOpenFeed::start(fs::Filesystem& fs, std::vector<Root> roots) {
  std::vector<std::string> paths;
  for (const Root& r : roots) paths.push_back(r.mountpoint);
  LC_ASSIGN_OR_RETURN(FanotifyTracer tracer, FanotifyTracer::open(paths));
  std::unique_ptr<OverlayOpenFeed> feed(new OverlayOpenFeed());
  feed->stop_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  feed->flush_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!feed->stop_.valid() || !feed->flush_.valid()) return errno_status("eventfd for the open feed");
  OverlayOpenFeed* self = feed.get();
  feed->thread_ = std::jthread([&fs, self, roots = std::move(roots), tracer = std::move(tracer)]() mutable {
    auto on_event = [&](const std::string& path, const FileEvent& e) {
      if (!e.opened) return;
      for (const Root& r : roots) {
        if (path.size() <= r.mountpoint.size() + 1 || path.compare(0, r.mountpoint.size(), r.mountpoint) != 0 ||
            (r.mountpoint != "/" && path[r.mountpoint.size()] != '/'))
          continue;
        const std::string rel = path.substr(r.mountpoint == "/" ? 1 : r.mountpoint.size() + 1);
        if (auto id = fs.index().lookup_path(r.archive_root.empty() ? rel : r.archive_root + "/" + rel)) fs.note_open(*id);
        return;
      }
    };
    auto on_flushed = [self] {
      std::lock_guard lock(self->mu_);
      ++self->flushes_;
      self->flushed_.notify_all();
    };
    if (Status s = tracer.follow(self->stop_.get(), self->flush_.get(), on_event, on_flushed); !s.ok())
      std::cerr << "lazycache: following the job's opens: " << s.to_string() << " (the next save's access list may miss files)\n";
  });
  return feed;
}

void OverlayOpenFeed::flush() {
  std::unique_lock lock(mu_);
  const uint64_t target = flushes_ + 1;
  const uint64_t one = 1;
  ssize_t ignored = ::write(flush_.get(), &one, sizeof(one));
  (void)ignored;
  flushed_.wait_for(lock, std::chrono::seconds(1), [&] { return flushes_ >= target; });
}

OverlayOpenFeed::~OverlayOpenFeed() {
  const uint64_t one = 1;
  ssize_t ignored = ::write(stop_.get(), &one, sizeof(one));
  (void)ignored;
  if (thread_.joinable()) thread_.join();
}

}  // namespace lazycache::cli
