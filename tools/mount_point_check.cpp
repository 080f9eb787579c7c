// SPDX-License-Identifier: MIT
#include "tools/mount_point_check.h"

#include <dirent.h>

#include <cerrno>

#include "format/quote.h"

namespace lazycache::cli {

Status require_empty_mountpoint(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (!dir) return errno == ENOENT ? Status() : errno_status("opening mount point " + path);
  size_t entries = 0;
  std::string first;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (entries++ == 0) first = name;
  }
  ::closedir(dir);
  if (entries == 0) return Status();
  return Status(ErrorCode::kPreconditionFailed,
                path + " is not empty (" + std::to_string(entries) + (entries == 1 ? " entry" : " entries") + ", e.g. " +
                    format::quote_path_if_needed(first) +
                    "): a mount would hide them. Empty it, mount elsewhere, restore --extract over it, or pass "
                    "--allow-nonempty (they come back after unmount)");
}

}  // namespace lazycache::cli
