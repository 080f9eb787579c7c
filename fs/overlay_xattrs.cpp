// SPDX-License-Identifier: MIT
// File: fs/overlay_xattrs.cpp -- extended attributes of the merged view (upper copy, else archive).
#include <sys/xattr.h>

#include "fs/overlay.h"
#include "fs/overlay_internal.h"

namespace lazycache::fs {
using namespace overlay_detail;

Result<std::optional<std::string>> Overlay::getxattr(uint64_t ino, std::string_view name) {
  std::lock_guard lock(mu_);
  LC_ASSIGN_OR_RETURN(NodeView n, node(ino));
  LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
  const std::string path = upper_path(rel);
  const std::string key(name);
  ssize_t len = ::lgetxattr(path.c_str(), key.c_str(), nullptr, 0);
  if (len >= 0) {
    std::string value(static_cast<size_t>(len), '\0');
    len = ::lgetxattr(path.c_str(), key.c_str(), value.data(), value.size());
    if (len < 0) return errno_error("getxattr " + rel);
    value.resize(static_cast<size_t>(len));
    return std::optional<std::string>(std::move(value));
  }
  if (errno == ENODATA || errno == ENOTSUP) return std::optional<std::string>();
  if (errno != ENOENT || !n.lower) return errno_error("getxattr " + rel);
  return lower_.getxattr(*n.lower, name);
}

Result<std::vector<std::string>> Overlay::listxattr(uint64_t ino) {
  std::lock_guard lock(mu_);
  LC_ASSIGN_OR_RETURN(NodeView n, node(ino));
  LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
  const std::string path = upper_path(rel);
  ssize_t len = ::llistxattr(path.c_str(), nullptr, 0);
  if (len < 0) {
    if (errno == ENOTSUP) return std::vector<std::string>();
    if (errno != ENOENT || !n.lower) return errno_error("listxattr " + rel);
    return lower_.listxattr(*n.lower);
  }
  std::string buf(static_cast<size_t>(len), '\0');
  len = ::llistxattr(path.c_str(), buf.data(), buf.size());
  if (len < 0) return errno_error("listxattr " + rel);
  std::vector<std::string> names;
  for (size_t i = 0; i < static_cast<size_t>(len);) {
    std::string nm(buf.data() + i);
    i += nm.size() + 1;
    if (!nm.empty()) names.push_back(std::move(nm));
  }
  return names;
}

Status Overlay::setxattr(uint64_t ino, std::string_view name, std::string_view value, int flags) {
  return with_copy_up([&]() -> Status {
    LC_RETURN_IF_ERROR(copy_up(ino));
    LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
    if (::lsetxattr(upper_path(rel).c_str(), std::string(name).c_str(), value.data(), value.size(), flags) != 0) {
      return errno_error("setxattr " + rel);
    }
    return Status();
  });
}

Status Overlay::removexattr(uint64_t ino, std::string_view name) {
  return with_copy_up([&]() -> Status {
    LC_RETURN_IF_ERROR(copy_up(ino));
    LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
    if (::lremovexattr(upper_path(rel).c_str(), std::string(name).c_str()) != 0) return errno_error("removexattr " + rel);
    return Status();
  });
}

}  // namespace lazycache::fs
