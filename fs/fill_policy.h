// SPDX-License-Identifier: MIT
// File: fs/fill_policy.h -- FillPolicy: how much of an archive a mount fetches into the chunk
// cache in the background (issue 15), as a pure function of the archive's size and the cache's
// bound. No threads, no I/O; the machinery is FrameFetcher's background priority.
//
// Why fill at all: a job reads files one by one, and every cold frame costs a round trip; a
// link that idles between them is wasted. Filling from the moment of the mount, behind the
// reads, brings the frames the job is about to read before it asks (node fixture: the whole
// 31 MiB archive arrives within ~0.5 s on a hosted link). Order: the learned hot region first
// (prefetch priority), then the rest in archive order (the order a job walking the tree reads).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace lazycache::fs {

struct FillPolicy {
  enum class Mode { kAuto, kAll, kNone, kBytes };
  Mode mode = Mode::kAuto;
  uint64_t cap_bytes = 0;  // kBytes: compressed bytes to fill at most

  // 1 GiB: what a hosted link (1 Gbit/s) delivers in ~9 s, about a CI job's span; a larger
  // archive (a huge cache whose jobs read a small part of it) fills only its first gigabyte
  // beyond the hot region, so a mount does not move gigabytes nobody reads.
  static constexpr uint64_t kAutoCapBytes = 1ull << 30;
  // auto fills everything only when the archive takes at most this share of the chunk cache's
  // bound: filling must not evict the other entries' frames the next jobs need.
  static constexpr uint64_t kAutoCacheShareDivisor = 4;

  // "auto", "all" or "none". Errors: kInvalidArgument (anything else: the CLI then reads the
  // text as a size, its own syntax, and makes a kBytes policy).
  static Result<FillPolicy> parse(std::string_view text);
  // The form parse() reads back ("auto", "all", "none", or the byte count).
  std::string to_string() const;
  // Compressed bytes of the archive to fill: 0 without a chunk cache (fill goes only there),
  // the whole archive for kAll, at most cap_bytes for kBytes; for kAuto the whole archive when
  // it is at most a quarter of the cache bound and at most kAutoCapBytes, else the smaller of
  // kAutoCapBytes and a quarter of the bound.
  uint64_t target_bytes(uint64_t archive_bytes, uint64_t cache_bound_bytes, bool has_cache) const;
  bool operator==(const FillPolicy&) const = default;
};

}  // namespace lazycache::fs
