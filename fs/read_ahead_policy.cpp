// SPDX-License-Identifier: MIT
#include "fs/read_ahead_policy.h"

#include <algorithm>

namespace lazycache::fs {

FileRange ReadAheadPolicy::on_read(uint64_t offset, uint64_t length, uint64_t file_size) {
  const uint64_t end = std::min(file_size, offset + length);
  const uint64_t low = next_expected_ > config_.seek_tolerance_bytes ? next_expected_ - config_.seek_tolerance_bytes : 0;
  const bool sequential = first_ ? offset == 0 : (offset >= low && offset <= next_expected_ + config_.seek_tolerance_bytes);
  first_ = false;
  if (!sequential) {
    window_ = config_.initial_window_bytes;
    requested_until_ = end;
    next_expected_ = end;
    return {};
  }
  next_expected_ = std::max(next_expected_, end);
  const uint64_t want_until = std::min(file_size, end + window_);
  window_ = std::min(config_.max_window_bytes, window_ * 2);
  const uint64_t from = std::max(requested_until_, end);
  // Ask again only once a useful amount is missing, so small reads do not each queue a sliver.
  if (want_until <= from || want_until - from < std::min<uint64_t>(config_.initial_window_bytes / 2, file_size - from)) {
    return {};
  }
  requested_until_ = want_until;
  return {from, want_until - from};
}

}  // namespace lazycache::fs
