// SPDX-License-Identifier: MIT
// DirsAhead: directories of staged targets made from the index ahead of the write walk.
#include "format/dirs_ahead.h"

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
    walk.set_create_missing(true);
    for (EntryId d : job.dirs) {
      if (stop_.load(std::memory_order_relaxed)) return;
      // Opening it makes it (and any parent not made yet) below verified descriptors.
      if (!walk.open(d, [] { return std::string("a directory made ahead"); }).ok()) return;  // the walk reports it
      made_[j][d].store(true, std::memory_order_release);
      ++made_count_;
    }
  }
}

}  // namespace lazycache::format
