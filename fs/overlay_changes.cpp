// SPDX-License-Identifier: MIT
#include "fs/overlay_changes.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "fs/overlay_layout.h"

namespace lazycache::fs {

namespace {

// Depth-first below `dir_fd` (owned here); `rel` is its path relative to the upper root.
Status walk(int dir_fd, const std::string& rel, const std::string& upper_dir, std::vector<std::string>& out,
            std::vector<std::string>* moved_dirs) {
  DIR* d = ::fdopendir(dir_fd);
  if (!d) {
    int err = errno;
    ::close(dir_fd);
    return errno_status("listing " + upper_dir + "/" + rel, err);
  }
  std::vector<std::string> subdirs;
  errno = 0;
  while (dirent* de = ::readdir(d)) {
    std::string name = de->d_name;
    if (name == "." || name == ".." || overlay_reserved_name(name)) continue;
    std::string path = rel.empty() ? name : rel + "/" + name;
    struct stat st;
    if (::fstatat(::dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      int err = errno;
      ::closedir(d);
      return errno_status("lstat " + upper_dir + "/" + path, err);
    }
    if (S_ISDIR(st.st_mode)) {
      // A directory a kernel overlayfs moved here: archive files now show below this new path.
      const std::string full = upper_dir + "/" + path;
      if (moved_dirs != nullptr && ::lgetxattr(full.c_str(), kKernelRedirectXattr, nullptr, 0) >= 0) moved_dirs->push_back(path);
      subdirs.push_back(name);
      continue;
    }
    if (!kernel_overlay_whiteout(st)) out.push_back(std::move(path));  // deletions show in the merged view
  }
  // Close before descending, so the walk holds one descriptor at a time.
  ::closedir(d);
  for (const auto& name : subdirs) {
    std::string path = rel.empty() ? name : rel + "/" + name;
    int fd = ::open((upper_dir + "/" + path).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno_status("opening " + upper_dir + "/" + path);
    LC_RETURN_IF_ERROR(walk(fd, path, upper_dir, out, moved_dirs));
  }
  return Status();
}

}  // namespace

Result<std::vector<std::string>> list_upper_changes(const std::string& upper_dir, std::vector<std::string>* moved_dirs) {
  std::vector<std::string> out;
  int fd = ::open(upper_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno_status("opening " + upper_dir);
  LC_RETURN_IF_ERROR(walk(fd, "", upper_dir, out, moved_dirs));
  std::sort(out.begin(), out.end());
  if (moved_dirs != nullptr) std::sort(moved_dirs->begin(), moved_dirs->end());
  return out;
}

}  // namespace lazycache::fs
