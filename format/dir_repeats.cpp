// SPDX-License-Identifier: MIT
#include "format/dir_repeats.h"

#include <algorithm>

namespace lazycache::format {

namespace {

constexpr size_t kNever = SIZE_MAX;

bool is_member_dir(const std::vector<IndexNode>& nodes, uint32_t n) {
  return n != 0 && nodes[n].type == EntryType::kDirectory && !nodes[n].implicit_dir;
}

}  // namespace

std::vector<uint32_t> directories_to_repeat(const std::vector<IndexNode>& nodes, const std::vector<uint32_t>& stream) {
  std::vector<size_t> live(nodes.size(), kNever);  // position of each node's last member
  for (size_t i = 0; i < stream.size(); ++i) live[stream[i]] = i;

  // One pass in stream order: whether each path exists yet (a member of it or below it was
  // extracted), whether a directory existed at its live member, and where the run of members
  // inside it right after its live member ends.
  std::vector<bool> exists(nodes.size(), false), existed_at_live(nodes.size(), false);
  std::vector<size_t> run_end(nodes.size(), kNever);
  std::vector<uint32_t> open;  // directories whose run after their live member is still going
  std::vector<bool> repeat(nodes.size(), false);
  auto inside = [&](uint32_t n, uint32_t dir) {
    for (uint32_t p = nodes[n].parent; n != 0; n = p, p = nodes[n].parent)
      if (p == dir) return true;
    return false;
  };
  for (size_t i = 0; i < stream.size(); ++i) {
    const uint32_t n = stream[i];
    while (!open.empty() && !inside(n, open.back())) {
      run_end[open.back()] = i;
      open.pop_back();
    }
    // A directory that exists already is not created again: its parent does not change.
    const bool creates = !(nodes[n].type == EntryType::kDirectory && exists[n]);
    const uint32_t p = nodes[n].parent;
    if (creates && is_member_dir(nodes, p) && live[p] < i && (existed_at_live[p] || run_end[p] <= i)) repeat[p] = true;
    if (live[n] == i && is_member_dir(nodes, n)) {
      existed_at_live[n] = exists[n];
      open.push_back(n);
    }
    for (uint32_t a = n; a != 0 && !exists[a]; a = nodes[a].parent) exists[a] = true;
  }
  std::vector<uint32_t> out;
  for (uint32_t n = 0; n < nodes.size(); ++n)
    if (repeat[n]) out.push_back(n);
  std::sort(out.begin(), out.end(), [&](uint32_t a, uint32_t b) { return live[a] < live[b]; });
  return out;
}

}  // namespace lazycache::format
