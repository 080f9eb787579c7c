// SPDX-License-Identifier: MIT
#include "format/fs_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "format/quote.h"

namespace lazycache::format {

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    if (!part.empty() && part != ".") out.emplace_back(part);
    i = j + 1;
  }
  return out;
}

namespace {
constexpr std::string_view kTemporaryPrefix = ".lazycache-tmp.";

// A non-empty run of decimal digits of at most 18 (no overflow), without a leading zero.
bool decimal(std::string_view s) {
  return !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string_view::npos && (s[0] != '0' || s.size() == 1);
}
}  // namespace

std::string extract_temporary_name(uint64_t counter) {
  return std::string(kTemporaryPrefix) + std::to_string(::getpid()) + "." + std::to_string(counter);
}

long extract_temporary_pid(std::string_view name) {
  if (name.substr(0, kTemporaryPrefix.size()) != kTemporaryPrefix) return 0;
  name.remove_prefix(kTemporaryPrefix.size());
  size_t dot = name.find('.');
  if (dot == std::string_view::npos || !decimal(name.substr(0, dot)) || !decimal(name.substr(dot + 1))) return 0;
  long pid = std::stol(std::string(name.substr(0, dot)));
  return pid > 0 && pid <= 0x3fffffff ? pid : 0;
}

Result<Fd> open_dir_below(int base_fd, const std::vector<std::string>& comps, bool create, const std::string& what) {
  // The walk starts at base_fd itself: a dup of it only when there is no component to open (a
  // directory walk opens one component at a time, and a dup + close per directory was a quarter
  // of an extract's descriptor syscalls).
  Fd cur;
  for (const auto& c : comps) {
    const int at = cur.valid() ? cur.get() : base_fd;
    int fd = ::openat(at, c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(at, c.c_str(), 0755) != 0 && errno != EEXIST)
        return errno_status("creating directory " + quote_path(c) + " of " + what);
      fd = ::openat(at, c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
      int err = errno;
      if (err == ELOOP || err == ENOTDIR)
        return Status(ErrorCode::kPermissionDenied, what + ": " + quote_path(c) + " is a symlink or not a directory; refusing to follow it",
                      err);
      return errno_status("opening directory " + quote_path(c) + " of " + what, err);
    }
    cur = Fd(fd);
  }
  if (!cur.valid()) {
    cur = Fd(::fcntl(base_fd, F_DUPFD_CLOEXEC, 0));
    if (!cur.valid()) return errno_status("dup");
  }
  return cur;
}

Result<Fd> open_dir_path(const std::string& path, bool create_parents) {
  if (create_parents) {
    bool absolute = !path.empty() && path[0] == '/';
    std::string prefix = absolute ? "/" : "";
    for (const auto& c : split_path(path)) {
      prefix += c;
      if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return errno_status("creating directory " + prefix);
      prefix += '/';
    }
  }
  int fd = ::open(path.empty() ? "." : path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_status("opening directory " + path);
  return Fd(fd);
}

}  // namespace lazycache::format
