// SPDX-License-Identifier: MIT
// File: fs/log_rate_limit.h -- LogRateLimit: a log line per event, but not a flood. A damaged
// chunk cache can fail thousands of blobs in a minute; each gets its line until `burst` lines
// were written within `window`, then the rest of the window is counted and reported in the
// first line of the next one ("N more not logged").
// Pure: no clock, no threads, no I/O (the caller passes the time and serialises calls).
#pragma once

#include <chrono>
#include <cstdint>

namespace lazycache::fs {

class LogRateLimit {
 public:
  using Clock = std::chrono::steady_clock;

  // 10 lines a minute: enough to name the first blobs of a damaged cache, few enough that a
  // daemon log stays readable.
  explicit LogRateLimit(uint32_t burst = 10, Clock::duration window = std::chrono::minutes(1)) : burst_(burst), window_(window) {}

  // True when the event at `now` may be logged. `suppressed` gets the events not logged since
  // the last line that was (to say so in this one); 0 otherwise.
  bool allow(Clock::time_point now, uint64_t& suppressed) {
    suppressed = 0;
    if (lines_ == 0 || now - window_start_ >= window_) {
      window_start_ = now;
      lines_ = 0;
    }
    if (lines_ >= burst_) {
      ++suppressed_;
      return false;
    }
    ++lines_;
    suppressed = suppressed_;
    suppressed_ = 0;
    return true;
  }

 private:
  uint32_t burst_;
  Clock::duration window_;
  Clock::time_point window_start_{};
  uint32_t lines_ = 0;
  uint64_t suppressed_ = 0;
};

}  // namespace lazycache::fs
