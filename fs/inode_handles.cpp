// SPDX-License-Identifier: MIT
#include "fs/inode_handles.h"

#include <utility>

namespace lazycache::fs {

InodeHandles::InodeHandles(OpenFn open, ReleaseFn release, size_t capacity)
    : open_(std::move(open)), release_(std::move(release)), capacity_(capacity == 0 ? 1 : capacity) {}

Result<std::shared_ptr<const uint64_t>> InodeHandles::get(format::EntryId id) {
  std::lock_guard lock(mu_);
  if (auto it = by_file_.find(id); it != by_file_.end()) return it->second;
  // Opened under the lock: two first READs of one file must not open it twice. Filesystem::open
  // takes no lock a read path holds while it waits on us.
  LC_ASSIGN_OR_RETURN(uint64_t h, open_(id));
  ReleaseFn release = release_;
  std::shared_ptr<const uint64_t> handle(new uint64_t(h), [release](const uint64_t* p) {
    release(*p);
    delete p;
  });
  if (by_file_.size() >= capacity_) {
    by_file_.erase(order_.front());  // a holder keeps its own reference
    order_.pop_front();
  }
  by_file_.emplace(id, handle);
  order_.push_back(id);
  return handle;
}

size_t InodeHandles::size() const {
  std::lock_guard lock(mu_);
  return by_file_.size();
}

}  // namespace lazycache::fs
