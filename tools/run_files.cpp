// SPDX-License-Identifier: MIT
#include "tools/run_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include "common/posix_files.h"
#include "tools/mount_state.h"

namespace lazycache::cli {

Status make_run_dir() {
  const std::string dir = run_dir();
  if (const size_t slash = dir.rfind('/'); slash != std::string::npos && slash > 0) {
    LC_RETURN_IF_ERROR(make_dirs(dir.substr(0, slash)));
  }
  if (::mkdir(dir.c_str(), kRunDirMode) != 0 && errno != EEXIST) return errno_status("mkdir " + dir);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return errno_status("stat " + dir);
  const uid_t me = ::geteuid();
  if (!S_ISDIR(st.st_mode) || (st.st_uid != me && me != 0)) {
    return Status(ErrorCode::kPermissionDenied, "run directory " + dir + " is not a directory of uid " + std::to_string(me) +
                                                    " (owner uid " + std::to_string(st.st_uid) +
                                                    "): set LAZYCACHE_RUN_DIR to a directory of your own");
  }
  if ((st.st_mode & 07777) != kRunDirMode && ::chmod(dir.c_str(), kRunDirMode) != 0) return errno_status("chmod 0700 " + dir);
  return Status();
}

Status write_run_file(const std::string& path, const std::string& content) { return replace_file(path, content, kRunFileMode); }

}  // namespace lazycache::cli
