// SPDX-License-Identifier: MIT
// File: fs/cache_write_backoff.h -- CacheWriteBackoff: when the chunk cache cannot store frames
// (its disk is full, writes fail), stop trying for a while instead of paying a failed blob write
// for every frame, and say so once.
//
// Policy: the first failure pauses writes for `first` (30 s); each failure of the retry that
// follows a pause doubles the pause, up to `max` (5 min); a success ends it. Pure: no clock, no
// threads, no I/O (the caller passes the time and serialises calls); ChunkCache owns one.
#pragma once

#include <chrono>
#include <cstdint>

namespace lazycache::fs {

class CacheWriteBackoff {
 public:
  using Clock = std::chrono::steady_clock;

  // 30 s: a job step that deletes its outputs frees room within seconds to minutes, and a retry
  // costs one free-space check or one failed write. 5 min: a disk that stays full is retried a
  // dozen times an hour, never per frame.
  explicit CacheWriteBackoff(Clock::duration first = std::chrono::seconds(30), Clock::duration max = std::chrono::minutes(5))
      : first_(first), max_(max) {}

  // True while writes should be skipped.
  bool paused(Clock::time_point now) const { return failures_ > 0 && now < until_; }
  // Records a failed write at `now` and pauses. True when this starts a pause from a working
  // state (the caller warns once); false for a retry that failed again.
  bool failed(Clock::time_point now) {
    const bool started = failures_ == 0;
    Clock::duration pause = first_;
    for (uint32_t i = 0; i < failures_ && pause < max_; ++i) pause *= 2;
    if (pause > max_) pause = max_;
    ++failures_;
    until_ = now + pause;
    return started;
  }
  // Records a stored write. True when it ends a pause (the caller says caching resumed).
  bool succeeded() {
    const bool ended = failures_ > 0;
    failures_ = 0;
    return ended;
  }
  // Room was freed (gc, clear): the next write tries at once. The episode goes on: a failure
  // then pauses again without a second warning.
  void reset() { until_ = Clock::time_point{}; }
  uint32_t consecutive_failures() const { return failures_; }
  Clock::time_point paused_until() const { return until_; }

 private:
  Clock::duration first_, max_;
  uint32_t failures_ = 0;
  Clock::time_point until_{};
};

}  // namespace lazycache::fs
