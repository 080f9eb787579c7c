// SPDX-License-Identifier: MIT
#include "fs/archive_read_ahead.h"

#include <algorithm>

namespace lazycache::fs {

FrameSpan ArchiveReadAhead::on_read(uint32_t first, uint32_t last, uint32_t frame_count) {
  ++tick_;
  if (frame_count == 0 || last < first || last >= frame_count) return {};
  Cursor* match = nullptr;
  for (Cursor& c : cursors_) {
    // Frames already asked for count as read: their files may reach the job from the kernel's
    // page cache (Filesystem's hand-off) without a read here, so the next read lands past them.
    const uint32_t reach = std::max(c.frame, c.requested_until);
    if (first >= c.frame && first <= uint64_t{reach} + config_.gap_frames) {
      match = &c;
      break;
    }
  }
  if (match == nullptr) {
    Cursor fresh{last, last, config_.initial_frames, tick_};
    if (cursors_.size() < config_.streams) {
      cursors_.push_back(fresh);
    } else if (!cursors_.empty()) {
      *std::min_element(cursors_.begin(), cursors_.end(),
                        [](const Cursor& a, const Cursor& b) { return a.last_used < b.last_used; }) = fresh;
    }
    return {};
  }
  match->last_used = tick_;
  if (last <= match->frame) return {};  // still inside the cursor's frame
  match->frame = last;
  const uint32_t window = match->window;
  match->window = std::min(config_.max_frames, std::max<uint32_t>(1, match->window * 2));
  const uint64_t want_until = std::min<uint64_t>(uint64_t{frame_count} - 1, uint64_t{last} + window);
  const uint64_t from = std::max<uint64_t>(uint64_t{match->requested_until} + 1, uint64_t{last} + 1);
  if (want_until < from) return {};
  match->requested_until = static_cast<uint32_t>(want_until);
  return {static_cast<uint32_t>(from), static_cast<uint32_t>(want_until - from + 1)};
}

}  // namespace lazycache::fs
