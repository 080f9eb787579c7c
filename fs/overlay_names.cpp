// SPDX-License-Identifier: MIT
// File: fs/overlay_names.cpp -- changes to names: whiteouts, mkdir/mknod/symlink/link, unlink,
// rmdir and rename.
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>

#include "common/posix_files.h"
#include "fs/overlay.h"
#include "fs/overlay_internal.h"

namespace lazycache::fs {
using namespace overlay_detail;

Status Overlay::make_whiteout(const std::string& rel_dir, std::string_view name) {
  // An empty name makes the directory opaque.
  may_have_whiteouts_ = true;
  const std::string marker = upper_path(rel_dir) + "/" + overlay_marker_name(name);
  int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return errno_error("create whiteout " + marker);
  ::close(fd);
  return Status();
}

Status Overlay::clear_whiteout(const std::string& rel_dir, std::string_view name) {
  const std::string marker = upper_path(rel_dir) + "/" + overlay_marker_name(name);
  if (::unlink(marker.c_str()) != 0 && errno != ENOENT) return errno_error("remove whiteout " + marker);
  return Status();
}

Status Overlay::prepare_new_name(uint64_t parent, std::string_view name, bool* had_whiteout) {
  if (reserved(name)) return sys_error(EPERM, std::string(name) + " is a reserved name in a lazycache mount");
  if (name.size() > 255) return sys_error(ENAMETOOLONG, std::string(name));
  LC_ASSIGN_OR_RETURN(Resolved r, resolve(parent, name));
  if (r.exists) return sys_error(EEXIST, std::string(name));
  LC_RETURN_IF_ERROR(node(parent).status());
  LC_RETURN_IF_ERROR(ensure_upper_dir(parent));
  LC_ASSIGN_OR_RETURN(std::string dir, path_of(parent));
  *had_whiteout = whiteout(dir, name);
  return Status();
}

Result<OverlayEntry> Overlay::finish_create(uint64_t parent, std::string_view name, const Caller& who, bool replaced_whiteout) {
  LC_ASSIGN_OR_RETURN(std::string dir, path_of(parent));
  const std::string rel = join(dir, name);
  const std::string path = upper_path(rel);
  if (geteuid() == 0) ::lchown(path.c_str(), who.uid, who.gid);
  if (replaced_whiteout) LC_RETURN_IF_ERROR(clear_whiteout(dir, name));
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return errno_error("lstat " + path);
  const uint64_t ino = next_ino_++;
  upper_ino_[static_cast<uint64_t>(st.st_ino)] = ino;
  return remember(ino, parent, name, std::nullopt, st);
}

Result<OverlayEntry> Overlay::mkdir(uint64_t parent, std::string_view name, uint32_t mode, const Caller& who) {
  std::lock_guard lock(mu_);
  bool had_whiteout = false;
  LC_RETURN_IF_ERROR(prepare_new_name(parent, name, &had_whiteout));
  LC_ASSIGN_OR_RETURN(std::string dir, path_of(parent));
  const std::string path = upper_path(join(dir, name));
  upper_dirs_changed();
  if (::mkdir(path.c_str(), 0700) != 0) return errno_error("mkdir " + path);
  if (::chmod(path.c_str(), mode & 07777) != 0) return errno_error("chmod " + path);
  // A directory made where an archive one was deleted must not show the old one's entries.
  if (had_whiteout) LC_RETURN_IF_ERROR(keeping_dir_times(path, [&] { return make_whiteout(join(dir, name), ""); }));
  return finish_create(parent, name, who, had_whiteout);
}

Result<OverlayEntry> Overlay::mknod(uint64_t parent, std::string_view name, uint32_t mode, const Caller& who) {
  if (!S_ISREG(mode)) return sys_error(EPERM, "only regular files can be created in a lazycache mount");
  std::lock_guard lock(mu_);
  return create_empty_file(parent, name, mode, who);
}

Result<OverlayEntry> Overlay::create_empty_file(uint64_t parent, std::string_view name, uint32_t mode, const Caller& who) {
  bool had_whiteout = false;
  LC_RETURN_IF_ERROR(prepare_new_name(parent, name, &had_whiteout));
  LC_ASSIGN_OR_RETURN(std::string dir, path_of(parent));
  const std::string path = upper_path(join(dir, name));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno_error("create " + path);
  ::fchmod(fd, mode & 07777);
  ::close(fd);
  return finish_create(parent, name, who, had_whiteout);
}

Result<OverlayEntry> Overlay::symlink(std::string_view target, uint64_t parent, std::string_view name, const Caller& who) {
  std::lock_guard lock(mu_);
  bool had_whiteout = false;
  LC_RETURN_IF_ERROR(prepare_new_name(parent, name, &had_whiteout));
  LC_ASSIGN_OR_RETURN(std::string dir, path_of(parent));
  const std::string path = upper_path(join(dir, name));
  if (::symlink(std::string(target).c_str(), path.c_str()) != 0) return errno_error("symlink " + path);
  return finish_create(parent, name, who, had_whiteout);
}

Result<OverlayEntry> Overlay::link(uint64_t ino, uint64_t new_parent, std::string_view new_name) {
  return with_copy_up([&]() -> Result<OverlayEntry> {
    LC_ASSIGN_OR_RETURN(struct stat src, stat_of(ino));
    if (S_ISDIR(src.st_mode)) return sys_error(EPERM, "hard link to a directory");
    bool had_whiteout = false;
    LC_RETURN_IF_ERROR(prepare_new_name(new_parent, new_name, &had_whiteout));
    LC_RETURN_IF_ERROR(copy_up(ino));
    LC_ASSIGN_OR_RETURN(std::string from, path_of(ino));
    LC_ASSIGN_OR_RETURN(std::string dir, path_of(new_parent));
    const std::string to = upper_path(join(dir, new_name));
    if (::link(upper_path(from).c_str(), to.c_str()) != 0) return errno_error("link " + to);
    if (had_whiteout) LC_RETURN_IF_ERROR(clear_whiteout(dir, new_name));
    struct stat st;
    if (::lstat(to.c_str(), &st) != 0) return errno_error("lstat " + to);
    return remember(ino, new_parent, new_name, std::nullopt, st);
  });
}

Status Overlay::unlink(uint64_t parent, std::string_view name) {
  std::lock_guard lock(mu_);
  LC_ASSIGN_OR_RETURN(Resolved r, resolve(parent, name));
  if (!r.exists) return sys_error(ENOENT, std::string(name));
  const bool is_dir = r.upper ? S_ISDIR(r.st.st_mode) : lower_.index().entry(*r.lower).type == format::EntryType::kDirectory;
  if (is_dir) return sys_error(EISDIR, std::string(name));
  LC_RETURN_IF_ERROR(ensure_upper_dir(parent));
  LC_ASSIGN_OR_RETURN(std::string dir, path_of(parent));
  LC_ASSIGN_OR_RETURN(NodeView pn, node(parent));
  const bool in_archive = pn.lower && !opaque(dir) && lower_.index().lookup(*pn.lower, name).has_value();
  if (r.upper) {
    const std::string path = upper_path(join(dir, name));
    if (::unlink(path.c_str()) != 0) return errno_error("unlink " + path);
    forget_upper_inode(r.st);
  }
  if (in_archive) LC_RETURN_IF_ERROR(make_whiteout(dir, name));
  drop_link(parent, name);
  return Status();
}

Status Overlay::rmdir(uint64_t parent, std::string_view name) {
  std::lock_guard lock(mu_);
  LC_ASSIGN_OR_RETURN(Resolved r, resolve(parent, name));
  if (!r.exists) return sys_error(ENOENT, std::string(name));
  const bool is_dir = r.upper ? S_ISDIR(r.st.st_mode) : lower_.index().entry(*r.lower).type == format::EntryType::kDirectory;
  if (!is_dir) return sys_error(ENOTDIR, std::string(name));
  LC_ASSIGN_OR_RETURN(std::string dir, path_of(parent));
  const std::string rel = join(dir, name);
  LC_ASSIGN_OR_RETURN(auto kids, list_at(rel, r.upper, r.lower));
  if (!kids.empty()) return sys_error(ENOTEMPTY, rel);
  LC_RETURN_IF_ERROR(ensure_upper_dir(parent));
  LC_ASSIGN_OR_RETURN(NodeView pn, node(parent));
  const bool in_archive = pn.lower && !opaque(dir) && lower_.index().lookup(*pn.lower, name).has_value();
  if (r.upper) {
    const std::string path = upper_path(rel);
    for (const std::string& marker : list_dir(path)) ::unlink((path + "/" + marker).c_str());
    if (::rmdir(path.c_str()) != 0) return errno_error("rmdir " + path);
    forget_upper_inode(r.st);
  }
  if (in_archive) LC_RETURN_IF_ERROR(make_whiteout(dir, name));
  drop_link(parent, name);
  return Status();
}

Status Overlay::rename(uint64_t parent, std::string_view name, uint64_t new_parent, std::string_view new_name, unsigned flags) {
  if ((flags & ~static_cast<unsigned>(RENAME_NOREPLACE)) != 0) return sys_error(EINVAL, "rename flags not supported");
  if (reserved(new_name)) return sys_error(EPERM, std::string(new_name) + " is a reserved name in a lazycache mount");
  return with_copy_up([&] { return rename_locked(parent, name, new_parent, new_name, flags); });
}

Status Overlay::rename_locked(uint64_t parent, std::string_view name, uint64_t new_parent, std::string_view new_name, unsigned flags) {
  LC_ASSIGN_OR_RETURN(Resolved src, resolve(parent, name));
  if (!src.exists) return sys_error(ENOENT, std::string(name));
  LC_ASSIGN_OR_RETURN(Resolved dst, resolve(new_parent, new_name));
  if (dst.exists && (flags & RENAME_NOREPLACE)) return sys_error(EEXIST, std::string(new_name));
  auto is_dir = [&](const Resolved& r) {
    return r.upper ? S_ISDIR(r.st.st_mode) : lower_.index().entry(*r.lower).type == format::EntryType::kDirectory;
  };
  const uint64_t src_ino = ino_for(src);
  LC_ASSIGN_OR_RETURN(std::string src_dir, path_of(parent));
  LC_ASSIGN_OR_RETURN(std::string dst_dir, path_of(new_parent));
  const std::string src_rel = join(src_dir, name), dst_rel = join(dst_dir, new_name);
  const bool src_is_dir = is_dir(src);
  if (src_is_dir && (dst_rel == src_rel || dst_rel.rfind(src_rel + "/", 0) == 0)) {
    return dst_rel == src_rel ? Status() : sys_error(EINVAL, "cannot move a directory into itself");
  }
  bool dst_lower_dir = false;
  if (dst.exists) {
    if (ino_for(dst) == src_ino) return Status();  // two names of one file: nothing to do
    const bool dst_is_dir = is_dir(dst);
    if (src_is_dir && !dst_is_dir) return sys_error(ENOTDIR, dst_rel);
    if (!src_is_dir && dst_is_dir) return sys_error(EISDIR, dst_rel);
    if (dst_is_dir) {
      LC_ASSIGN_OR_RETURN(auto kids, list_at(dst_rel, dst.upper, dst.lower));
      if (!kids.empty()) return sys_error(ENOTEMPTY, dst_rel);
      dst_lower_dir = dst.lower.has_value();
    }
  }
  // An archive directory's files are all fetched before anything changes (with_copy_up drops
  // mu_ for that): a failed fetch leaves no trace, and the copy below finds every file here.
  if (src_is_dir && src.lower) LC_RETURN_IF_ERROR(tree_bytes_ready(src_rel, *src.lower));
  LC_RETURN_IF_ERROR(ensure_upper_dir(parent));
  LC_RETURN_IF_ERROR(ensure_upper_dir(new_parent));
  if (src_is_dir) {
    if (src.lower) LC_RETURN_IF_ERROR(copy_up_tree(src_rel, *src.lower, src_ino));
  } else if (!src.upper) {
    LC_RETURN_IF_ERROR(copy_up_entry(src_rel, *src.lower, src_ino, std::nullopt));
  }
  if (dst.exists && dst.upper) {
    if (S_ISDIR(dst.st.st_mode)) {
      const std::string path = upper_path(dst_rel);
      for (const std::string& marker : list_dir(path)) ::unlink((path + "/" + marker).c_str());
    }
    forget_upper_inode(dst.st);
  }
  const std::string from = upper_path(src_rel), to = upper_path(dst_rel);
  upper_dirs_changed();  // a directory may have moved into place, or inodes changed paths
  if (::rename(from.c_str(), to.c_str()) != 0) return errno_error("rename " + from + " to " + to);
  LC_RETURN_IF_ERROR(clear_whiteout(dst_dir, new_name));
  if (src_is_dir && dst_lower_dir && !opaque(dst_rel)) LC_RETURN_IF_ERROR(make_whiteout(dst_rel, ""));
  LC_ASSIGN_OR_RETURN(NodeView pn, node(parent));
  if (pn.lower && !opaque(src_dir) && lower_.index().lookup(*pn.lower, name).has_value()) {
    LC_RETURN_IF_ERROR(make_whiteout(src_dir, name));
  }
  drop_link(new_parent, new_name);
  // An implicit source the kernel knows leaves its archive place: its Node follows it.
  if (known_implicit_at(parent, name) == src_ino) materialize(src_ino);
  const auto old_key = std::make_pair(parent, std::string(name));
  const auto new_key = std::make_pair(new_parent, std::string(new_name));
  names_.erase(old_key);
  if (auto it = nodes_.find(src_ino); it != nodes_.end()) {
    auto& links = it->second.links;
    std::replace(links.begin(), links.end(), old_key, new_key);
    if (std::find(links.begin(), links.end(), new_key) == links.end()) links.push_back(new_key);
    names_[new_key] = src_ino;
    if (!src_is_dir) it->second.lower.reset();
  }
  return Status();
}

}  // namespace lazycache::fs
