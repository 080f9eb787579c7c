// SPDX-License-Identifier: MIT
// File: fs/memory_budget.h -- MemoryBudget: the one byte budget every buffer of a mount draws
// from (decompressed frames held in memory and compressed bytes of fetches in flight).
// Thread-safe (atomic counter); never blocks.
#pragma once

#include <atomic>
#include <cstdint>

namespace lazycache::fs {

// The memory budget of a mount that was given none (`--memory-budget auto`): a sixteenth of the
// archive's tar stream, within [32 MiB, 256 MiB]. A small cache needs little: decode-ahead hands
// fetched frames to the kernel's page cache, so node's partial job (157 MiB tree) decodes each
// of its 50 frames about once at 32 MiB (peak RSS 52-58 MiB against 55-78 MiB at 256 MiB, no
// slower). A large tree's job has a larger working set: on the 2.1 GiB large fixture 32 MiB
// decoded 380-450 frames instead of ~300 and ran ~8 % longer, 128 MiB (what this gives it) ~290
// (docs/mount.md, Memory).
constexpr uint64_t kMinAutoMemoryBudget = 32ull << 20;
constexpr uint64_t kMaxAutoMemoryBudget = 256ull << 20;
constexpr uint64_t auto_memory_budget(uint64_t tar_stream_bytes) {
  const uint64_t b = tar_stream_bytes / 16;
  return b < kMinAutoMemoryBudget ? kMinAutoMemoryBudget : b > kMaxAutoMemoryBudget ? kMaxAutoMemoryBudget : b;
}

class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}

  // Takes n bytes if that keeps usage within the limit; false (nothing taken) otherwise.
  bool try_reserve(uint64_t n) {
    uint64_t cur = used_.load(std::memory_order_relaxed);
    while (cur + n <= limit_) {
      if (used_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed)) {
        note_peak(cur + n);
        return true;
      }
    }
    return false;
  }
  // Takes n bytes even past the limit: on-demand reads must make progress; the caller has
  // already asked caches to shrink.
  void reserve_forced(uint64_t n) { note_peak(used_.fetch_add(n, std::memory_order_relaxed) + n); }
  void release(uint64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }
  // The most ever used at once (tests and figures: did forced reservations overshoot?).
  uint64_t peak() const { return peak_.load(std::memory_order_relaxed); }

 private:
  void note_peak(uint64_t now) {
    uint64_t p = peak_.load(std::memory_order_relaxed);
    while (now > p && !peak_.compare_exchange_weak(p, now, std::memory_order_relaxed)) {}
  }

  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> peak_{0};
};

}  // namespace lazycache::fs
