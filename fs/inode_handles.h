// SPDX-License-Identifier: MIT
// File: fs/inode_handles.h -- InodeHandles: read handles kept by file instead of by open, for a
// mount whose kernel opens files without asking the daemon (FUSE's zero-message open).
//
// Why: every open(2) through FUSE is a round trip to the daemon (~25-40 us on a 2-core VM, most
// of it waking a thread on the other core), and a job opens thousands of files whose bytes the
// page-cache hand-off already put in the kernel. A read-only mount therefore answers the first
// OPEN with ENOSYS, and the kernel opens files by itself from then on (fs/fuse_adapter.h). The
// few READs that still come carry no handle of ours: they get one from here, by file.
//
// At most `capacity` handles are kept; the oldest goes first. A caller holds its handle through
// the call that uses it, so dropping one from the cache never pulls it from under a read. The
// per-handle state of a Filesystem handle (read-ahead window, the last timeout) is then kept per
// file, as a job reading one file through several descriptors would want anyway.
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "common/status.h"
#include "format/archive.h"

namespace lazycache::fs {

class InodeHandles {
 public:
  using OpenFn = std::function<Result<uint64_t>(format::EntryId)>;
  using ReleaseFn = std::function<void(uint64_t)>;
  // `release` runs once per handle `open` gave, when the last holder lets go; both must stay
  // callable until every handle got from here is gone.
  InodeHandles(OpenFn open, ReleaseFn release, size_t capacity);
  // The handle of file `id`, opened on first use (or again after it was dropped).
  // Errors: those of `open` (nothing is kept then).
  Result<std::shared_ptr<const uint64_t>> get(format::EntryId id);
  // Handles in the cache now (at most the capacity).
  size_t size() const;

 private:
  const OpenFn open_;
  const ReleaseFn release_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<format::EntryId, std::shared_ptr<const uint64_t>> by_file_;
  std::deque<format::EntryId> order_;  // oldest first
};

}  // namespace lazycache::fs
