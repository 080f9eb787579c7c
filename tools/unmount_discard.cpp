// SPDX-License-Identifier: MIT
// File: tools/unmount_discard.cpp -- see tools/unmount_discard.h.
#include "tools/unmount_discard.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "common/posix_files.h"
#include "format/quote.h"
#include "tools/save_record.h"

namespace lazycache::cli {
using format::quote_path;

namespace {

// Whether `r.state_dir` is the directory mount made for its daemon (".../upper/mount-<pid>",
// or its "/<n>" subdirectory when one daemon serves several paths) rather than a --upper-dir.
bool made_by_mount(const SaveRecord& r) {
  const std::string tag = "/upper/mount-" + std::to_string(r.pid);
  const size_t at = r.state_dir.rfind(tag);
  if (r.pid <= 0 || at == std::string::npos) return false;
  const std::string rest = r.state_dir.substr(at + tag.size());
  if (rest.empty()) return true;
  return rest.size() > 1 && rest[0] == '/' && rest.find_first_not_of("0123456789", 1) == std::string::npos;
}

}  // namespace

void discard_unsaved_changes(const std::vector<std::string>& unmounted) {
  for (const std::string& path : unmounted) {
    auto rec = read_save_record(path);
    if (!rec.ok() || rec->state_dir.empty()) continue;  // no record, a miss, or --read-only
    const bool changed = !list_dir(rec->state_dir + "/upper").empty();
    if (!made_by_mount(*rec)) {
      if (changed) {
        std::cerr << "lazycache unmount: " << quote_path(path) << ": not saved; the changes stay in " << quote_path(rec->state_dir)
                  << " (its --upper-dir)\n";
      }
      continue;
    }
    if (!remove_tree(rec->state_dir)) {
      std::cerr << "lazycache unmount: could not remove " << quote_path(rec->state_dir) << ": " << std::strerror(errno) << "\n";
      continue;
    }
    // One daemon's paths share .../upper/mount-<pid>: the last one out removes it (rmdir fails
    // while another path's directory is still there, as it should).
    const std::string parent = rec->state_dir.substr(0, rec->state_dir.rfind('/'));
    if (parent.rfind("/upper/mount-") != std::string::npos) ::rmdir(parent.c_str());
    if (changed) {
      std::cerr << "lazycache unmount: " << quote_path(path)
                << ": the changes made through the mount are discarded (unmount --save saves them)\n";
    }
  }
}

}  // namespace lazycache::cli
