// SPDX-License-Identifier: MIT
// File: fs/request_counts.h -- how many requests of each kind the kernel sent a mount (LOOKUP,
// GETATTR, OPEN, READ, ...), counted by the FUSE glue of both op tables and shown in `status` and
// the unmount figures (fs/mount_stats.h). FUSE-free, so the core's figures and its tests use it
// without libfuse. Why: the cost of a mount that is not data is the kernel's round trips, and a
// writable mount that sends a GETATTR per open where a read-only one sends none shows only here.
// Thread-safe: handler threads add with relaxed atomics; a snapshot is a plain value.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace lazycache::fs {

// One kind per group of FUSE opcodes a job's cost depends on; the name-changing operations
// (mknod, mkdir, symlink, link, unlink, rmdir, rename) share one, as do the four xattr ones.
enum class FuseRequest : uint8_t {
  kLookup,
  kForget,  // FORGET and each inode of BATCH_FORGET
  kGetattr,
  kSetattr,
  kReadlink,
  kOpen,
  kCreate,
  kRead,
  kWrite,
  kRelease,
  kOpendir,
  kReaddir,  // READDIR and READDIRPLUS
  kReleasedir,
  kNameChange,
  kXattr,
  kStatfs,
  kFsync,
  kCount
};

inline constexpr size_t kFuseRequestKinds = static_cast<size_t>(FuseRequest::kCount);

// The figure name of each kind ("lookup", "getattr", ...), in enum order.
const char* request_name(FuseRequest r);

using RequestSnapshot = std::array<uint64_t, kFuseRequestKinds>;

class RequestCounts {
 public:
  void add(FuseRequest r, uint64_t n = 1) { counts_[static_cast<size_t>(r)].fetch_add(n, std::memory_order_relaxed); }
  RequestSnapshot snapshot() const {
    RequestSnapshot s{};
    for (size_t i = 0; i < kFuseRequestKinds; ++i) s[i] = counts_[i].load(std::memory_order_relaxed);
    return s;
  }

 private:
  std::array<std::atomic<uint64_t>, kFuseRequestKinds> counts_{};
};

}  // namespace lazycache::fs
