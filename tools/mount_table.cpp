// SPDX-License-Identifier: MIT
#include "tools/mount_table.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tools/kernel_overlay.h"

namespace lazycache::cli {
namespace {

// /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_mountinfo(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (size_t j = 1; j <= 3; ++j) {
        char c = s[i + j];
        if (c < '0' || c > '7') ok = false;
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

}  // namespace

std::vector<MountEntry> read_mount_table() {
  std::vector<MountEntry> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string f;
    std::vector<std::string> parts;
    while (fields >> f) parts.push_back(f);
    if (parts.size() < 7) continue;
    size_t dash = 6;
    while (dash < parts.size() && parts[dash] != "-") ++dash;
    if (dash + 1 >= parts.size()) continue;
    MountEntry e;
    e.mount_id = std::atoi(parts[0].c_str());
    if (std::sscanf(parts[2].c_str(), "%u:%u", &e.dev_major, &e.dev_minor) != 2) continue;
    e.mountpoint = unescape_mountinfo(parts[4]);
    e.fstype = parts[dash + 1];
    if (dash + 2 < parts.size()) e.source = unescape_mountinfo(parts[dash + 2]);
    out.push_back(std::move(e));
  }
  return out;
}

bool is_lazycache_overlay_entry(const MountEntry& e) { return e.fstype == "overlay" && e.source == kKernelOverlaySource; }

bool is_lazycache_entry(const MountEntry& e) { return e.fstype == "fuse.lazycache" || is_lazycache_overlay_entry(e); }

}  // namespace lazycache::cli
