// SPDX-License-Identifier: MIT
#include "format/pack_order.h"

#include <unistd.h>

#include <algorithm>
#include <map>

#include "format/fs_util.h"

namespace lazycache::format {

Result<ScannedTree> scan_for_pack(const std::vector<PackRoot>& roots, XattrSet xattrs,
                                  const std::function<void(const std::string&)>& warn) {
  char cwd_buf[4096];
  if (!::getcwd(cwd_buf, sizeof cwd_buf)) return errno_status("getcwd");
  LC_ASSIGN_OR_RETURN(auto normalized, normalize_roots(roots, cwd_buf));
  LC_ASSIGN_OR_RETURN(ScannedTree tree, scan_tree(normalized, xattrs, warn));
  auto& nodes = tree.model.nodes;
  for (auto& n : nodes)  // children were added in sorted order per directory; keep lookups simple
    std::sort(n.children.begin(), n.children.end(), [&](uint32_t a, uint32_t b) { return nodes[a].name < nodes[b].name; });
  return tree;
}

std::vector<uint32_t> member_order(const IndexModel& model, const std::vector<uint32_t>& hot) {
  std::vector<uint32_t> order;
  std::vector<bool> done(model.nodes.size(), false);
  for (uint32_t h : hot) {
    order.push_back(h);
    done[h] = true;
  }
  std::vector<uint32_t> stack{0};
  while (!stack.empty()) {
    uint32_t id = stack.back();
    stack.pop_back();
    const IndexNode& n = model.nodes[id];
    if (id != 0 && !n.implicit_dir && !done[id]) order.push_back(id);
    for (auto it = n.children.rbegin(); it != n.children.rend(); ++it) stack.push_back(*it);
  }
  return order;
}

std::optional<uint32_t> find_node(const IndexModel& model, const std::string& path) {
  uint32_t cur = 0;
  for (const auto& part : split_path(path)) {
    const auto& ch = model.nodes[cur].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), part, [&](uint32_t c, const std::string& p) { return model.nodes[c].name < p; });
    if (it == ch.end() || model.nodes[*it].name != part) return std::nullopt;
    cur = *it;
  }
  return cur;
}

std::vector<uint32_t> resolve_hot_paths(const IndexModel& model, const std::vector<std::string>& paths) {
  std::vector<uint32_t> hot;
  std::vector<bool> seen(model.nodes.size(), false);
  for (const auto& p : paths) {
    auto id = find_node(model, p);
    if (id && model.nodes[*id].type == EntryType::kRegular && !seen[*id]) {
      seen[*id] = true;
      hot.push_back(*id);
    }
  }
  return hot;
}

TarMember node_tar_member(const IndexNode& n, const std::string& path, const std::string* hardlink_target) {
  TarMember m;
  m.path = path;
  m.mode = n.mode;
  m.uid = n.uid;
  m.gid = n.gid;
  m.mtime_ns = n.mtime_ns;
  for (const auto& x : n.xattrs) m.xattrs.emplace_back(x.name, x.value);
  switch (n.type) {
    case EntryType::kDirectory: m.type = TarType::kDirectory; break;
    case EntryType::kSymlink:
      m.type = TarType::kSymlink;
      m.linkname = n.symlink_target;
      break;
    case EntryType::kRegular:
      if (hardlink_target) {
        m.type = TarType::kHardlink;
        m.linkname = *hardlink_target;
      } else {
        m.type = TarType::kRegular;
        m.size = n.size;
      }
      break;
  }
  return m;
}

void share_hardlink_data(std::vector<IndexNode>& nodes, const std::vector<uint32_t>& order) {
  std::map<uint32_t, uint32_t> group_size;
  for (uint32_t id : order)
    if (nodes[id].type == EntryType::kRegular) ++group_size[nodes[id].link_group];
  for (uint32_t id : order) {
    IndexNode& n = nodes[id];
    if (n.type != EntryType::kRegular) continue;
    const IndexNode& leader = nodes[n.link_group];
    n.data_offset = leader.data_offset;
    n.content_digest = leader.content_digest;
    n.size = leader.size;
    n.nlink = group_size[n.link_group];
  }
}

}  // namespace lazycache::format
