// SPDX-License-Identifier: MIT
#include "tools/restore_timeline.h"

#include "tools/json_output.h"

namespace lazycache::cli {

void RestoreTimeline::mark(std::string_view name, Clock::time_point at) {
  if (at.time_since_epoch().count() == 0) return;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(at - start_).count();
  steps_.emplace_back(std::string(name), ms < 0 ? 0 : static_cast<uint64_t>(ms));
}

std::string RestoreTimeline::text() const {
  std::string out;
  for (const auto& [name, ms] : steps_) {
    if (!out.empty()) out += ", ";
    out += name + " " + std::to_string(ms) + " ms";
  }
  return out;
}

std::string RestoreTimeline::json() const {
  JsonObject o;
  for (const auto& [name, ms] : steps_) o.add(name + "_ms", ms);
  return o.str();
}

}  // namespace lazycache::cli
