// SPDX-License-Identifier: MIT
#include "tools/trace_order.h"

namespace lazycache::cli {

void TraceOrder::note(const std::string& path, const FileEvent& e) {
  if (e.closed_written) {
    if (auto it = place_.find(path); it != place_.end()) {
      order_[it->second].clear();
      place_.erase(it);
    }
  }
  // An open alone may be for writing: the file is listed now and forgotten again at its
  // close-after-write. A read-only close after a write (merged) is a read after the write.
  const bool read = e.closed_read || (e.opened && !e.closed_written);
  if (read && !place_.contains(path)) {
    place_.emplace(path, order_.size());
    order_.push_back(path);
  }
}

std::vector<std::string> TraceOrder::list() const {
  std::vector<std::string> out;
  out.reserve(place_.size());
  for (const auto& p : order_)
    if (!p.empty()) out.push_back(p);
  return out;
}

}  // namespace lazycache::cli
