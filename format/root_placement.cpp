// SPDX-License-Identifier: MIT
#include "format/root_placement.h"

#include "format/quote.h"

namespace lazycache::format {

Result<std::vector<RootPlacement>> place_roots(const Index& index, const std::vector<std::string>& paths) {
  const auto& roots = index.roots();
  std::vector<RootPlacement> out;
  if (paths.empty()) {
    for (const auto& r : roots) out.push_back({r.original_path, r.entry});
    return out;
  }
  bool all_match = true;
  for (const auto& p : paths) {
    bool found = false;
    for (const auto& r : roots) {
      if (r.original_path == p) {
        out.push_back({p, r.entry});
        found = true;
      }
    }
    all_match = all_match && found;
  }
  if (all_match) return out;
  if (paths.size() == roots.size()) {
    out.clear();
    for (size_t i = 0; i < paths.size(); ++i) out.push_back({paths[i], roots[i].entry});
    return out;
  }
  std::string saved;
  for (const auto& r : roots) saved += " " + quote_path(r.original_path);
  return Status(ErrorCode::kInvalidArgument, "the paths given do not match the entry's saved paths:" + saved +
                                                 " (give each saved path, or as many paths as were saved, in that order)");
}

}  // namespace lazycache::format
