// SPDX-License-Identifier: MIT
#include "fs/fill_policy.h"

#include <algorithm>

namespace lazycache::fs {

Result<FillPolicy> FillPolicy::parse(std::string_view text) {
  if (text == "auto") return FillPolicy{Mode::kAuto, 0};
  if (text == "all") return FillPolicy{Mode::kAll, 0};
  if (text == "none") return FillPolicy{Mode::kNone, 0};
  return Status(ErrorCode::kInvalidArgument, "fill policy '" + std::string(text) + "': expected auto, all, none or a size");
}

std::string FillPolicy::to_string() const {
  switch (mode) {
    case Mode::kAuto: return "auto";
    case Mode::kAll: return "all";
    case Mode::kNone: return "none";
    case Mode::kBytes: return std::to_string(cap_bytes);
  }
  return "auto";
}

uint64_t FillPolicy::target_bytes(uint64_t archive_bytes, uint64_t cache_bound_bytes, bool has_cache) const {
  if (!has_cache) return 0;
  switch (mode) {
    case Mode::kNone: return 0;
    case Mode::kAll: return archive_bytes;
    case Mode::kBytes: return std::min(archive_bytes, cap_bytes);
    case Mode::kAuto: break;
  }
  const uint64_t share = cache_bound_bytes / kAutoCacheShareDivisor;
  return std::min({archive_bytes, share, kAutoCapBytes});
}

}  // namespace lazycache::fs
