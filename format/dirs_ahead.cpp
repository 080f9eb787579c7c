// SPDX-License-Identifier: MIT
// DirsAhead: directories of staged targets made from the index ahead of the write walk.
#include "format/dirs_ahead.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <string>

#include "format/dir_stack.h"

namespace lazycache::format {

DirsAhead::DirsAhead(const Index& index, std::vector<Job> jobs) : index_(index), jobs_(std::move(jobs)) {
  for (size_t j = 0; j < jobs_.size(); ++j) made_.push_back(std::make_unique<std::atomic<bool>[]>(index_.entry_count()));
  thread_ = std::jthread([this] { run(); });
}

DirsAhead::~DirsAhead() { stop(); }

void DirsAhead::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

bool DirsAhead::made(size_t job, EntryId dir) const {
  return job < made_.size() && dir < index_.entry_count() && made_[job][dir].load(std::memory_order_acquire);
}

void DirsAhead::run() {
  for (size_t j = 0; j < jobs_.size(); ++j) {
    const Job& job = jobs_[j];
    DirStack walk;
    walk.reset(&index_, job.base_fd, job.top);
    // A parent not made yet (not in `dirs` before its child: never for an Extractor job) is made
    // by the walk; one made here is only opened.
    walk.set_create_missing(
        true, [this, j](EntryId d) { return made(j, d); }, job.mode);
    for (EntryId d : job.dirs) {
      if (stop_.load(std::memory_order_relaxed)) return;
      // Made in its parent, which is opened (below verified descriptors): a directory is opened
      // here only when it has subdirectories (1,086 of node's 2,884), not to make it.
      const Entry e = index_.entry(d);
      auto parent = walk.open(e.parent, [] { return std::string("a directory made ahead"); });
      if (!parent.ok()) return;  // the write walk reports it
      const std::string name(e.name);
      if (::mkdirat(*parent, name.c_str(), job.mode ? job.mode(d) : 0700) != 0 && errno != EEXIST) return;
      made_[j][d].store(true, std::memory_order_release);
      ++made_count_;
    }
  }
}

}  // namespace lazycache::format
