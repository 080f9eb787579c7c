// SPDX-License-Identifier: MIT
// File: fs/overlay_copy_up.cpp -- copy-up: archive directories, files and symlinks copied into upper/
// (files fetched into work/ without the overlay's mutex, then renamed in under it), hardlink
// groups linked to the copy, and whole directories copied for a rename.
#include <fcntl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include "common/posix_files.h"
#include "fs/overlay.h"
#include "fs/overlay_internal.h"

namespace lazycache::fs {
namespace overlay_detail {

void copy_xattrs_up(const format::Index& index, const format::Entry& e, const std::string& path, int fd) {
  if (!e.has_xattrs) return;
  for (const auto& x : index.xattrs(e.id)) {
    if (fd >= 0) ::fsetxattr(fd, x.name.c_str(), x.value.data(), x.value.size(), 0);
    else ::lsetxattr(path.c_str(), x.name.c_str(), x.value.data(), x.value.size(), 0);
  }
}

}  // namespace overlay_detail

using namespace overlay_detail;

namespace {

// 4 MiB: one archive frame; copy-up reads the file through the frame caches in these steps.
constexpr size_t kCopyChunk = 4u << 20;

}  // namespace

Status Overlay::ensure_upper_dir_path(const std::string& rel, EntryId lower_id, uint64_t ino) {
  const std::string path = upper_path(rel);
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? Status() : sys_error(ENOTDIR, path);
  LC_ASSIGN_OR_RETURN(Attr a, lower_.getattr(lower_id));
  LC_RETURN_IF_ERROR(keeping_dir_times(upper_path(parent_of(rel)), [&]() -> Status {
    upper_dirs_changed();
    if (::mkdir(path.c_str(), 0700) != 0) return errno_error("mkdir " + path);
    return Status();
  }));
  copy_xattrs_up(lower_.index(), lower_.index().entry(lower_id), path, -1);
  if (::lchown(path.c_str(), a.uid, a.gid) != 0 && geteuid() == 0) return errno_error("chown " + path);
  if (::chmod(path.c_str(), a.mode & 07777) != 0) return errno_error("chmod " + path);
  timespec ts[2] = {to_timespec(a.mtime_ns), to_timespec(a.mtime_ns)};
  ::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW);
  if (::lstat(path.c_str(), &st) == 0) upper_ino_[static_cast<uint64_t>(st.st_ino)] = ino;
  return Status();
}

Status Overlay::ensure_upper_dir(uint64_t ino) {
  if (ino == kRootIno) return Status();
  LC_ASSIGN_OR_RETURN(NodeView n, node(ino));
  LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
  struct stat st;
  if (::lstat(upper_path(rel).c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? Status() : sys_error(ENOTDIR, rel);
  if (!n.lower) return Status(ErrorCode::kNotFound, rel + " is gone");
  const uint64_t parent = n.parent;
  const EntryId lower_id = *n.lower;
  LC_RETURN_IF_ERROR(ensure_upper_dir(parent));
  return ensure_upper_dir_path(rel, lower_id, ino);
}

Status Overlay::copy_up(uint64_t ino, std::optional<uint64_t> size_limit) {
  LC_ASSIGN_OR_RETURN(NodeView n, node(ino));
  LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
  struct stat st;
  if (::lstat(upper_path(rel).c_str(), &st) == 0) return Status();
  if (!n.lower) return Status(ErrorCode::kNotFound, rel + " is gone");
  const EntryId lower_id = *n.lower;
  if (lower_.index().entry(lower_id).type == format::EntryType::kDirectory) return ensure_upper_dir(ino);
  LC_RETURN_IF_ERROR(ensure_upper_dir(n.parent));
  return copy_up_entry(rel, lower_id, ino, size_limit);
}

Result<std::string> Overlay::fetch_into_work(EntryId lower_id, uint64_t size) const {
  const format::Entry e = lower_.index().entry(lower_id);
  LC_ASSIGN_OR_RETURN(Attr a, lower_.getattr(lower_id));
  const std::string tmp = work_ + "/copy-" + std::to_string(temp_counter_.fetch_add(1) + 1);
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return errno_error("create " + tmp);
  // Every failure below removes the temp file: work/ keeps nothing of a copy-up that failed.
  auto fail = [&](Status s) {
    ::unlink(tmp.c_str());
    return s.with_context("copying " + lower_.index().path(lower_id) + " up from the archive");
  };
  if (size > 0) {
    auto h = lower_.open(lower_id, O_RDONLY);
    if (!h.ok()) return fail(h.error());
    Status s;
    for (uint64_t off = 0; off < size && s.ok(); off += kCopyChunk) {
      auto bytes = lower_.read_sync(*h, off, static_cast<size_t>(std::min<uint64_t>(kCopyChunk, size - off)));
      if (!bytes.ok()) s = bytes.error();
      else if (bytes->empty()) s = Status(ErrorCode::kCorrupt, "archive file shorter than its index says");
      else s = write_all(fd.get(), *bytes, "write " + tmp);
    }
    lower_.release(*h);
    if (!s.ok()) return fail(s);
  }
  copy_xattrs_up(lower_.index(), e, tmp, fd.get());
  if (::fchown(fd.get(), a.uid, a.gid) != 0 && geteuid() == 0) return fail(errno_error("chown " + tmp));
  if (::fchmod(fd.get(), a.mode & 07777) != 0) return fail(errno_error("chmod " + tmp));
  const timespec mtime = to_timespec(a.mtime_ns);
  timespec ts[2] = {mtime, mtime};
  ::futimens(fd.get(), ts);
  if (::close(fd.release()) != 0) return fail(errno_error("close " + tmp));
  return tmp;
}

Status Overlay::fetch_without_lock(std::unique_lock<std::mutex>& lock, FetchSet& set) {
  std::vector<FetchRequest> mine;
  std::vector<uint64_t> theirs;  // being fetched by another operation: wait, then decide anew
  for (const auto& [ino, want] : set.needed) {
    if (fetching_.count(ino)) theirs.push_back(ino);
    else mine.push_back(want);
  }
  // Marked all at once and for the whole batch: a single-file copy-up of one of them waits for
  // this operation, which installs it, rather than fetching it a second time.
  for (const FetchRequest& want : mine) fetching_.insert(want.ino);
  lock.unlock();
  auto results = fetch_all_into_work(mine);
  lock.lock();
  for (const FetchRequest& want : mine) fetching_.erase(want.ino);
  fetch_done_.notify_all();
  Status first_error;
  for (size_t i = 0; i < mine.size(); ++i) {
    if (!results[i]) continue;  // skipped after a failure
    if (!results[i]->ok()) {
      if (first_error.ok()) first_error = results[i]->error();
      continue;
    }
    Fetched& slot = set.fetched[mine[i].ino];
    if (!slot.tmp.empty()) ::unlink(slot.tmp.c_str());  // an older copy that no longer fit
    slot = Fetched{mine[i], std::move(*results[i]).value()};
  }
  if (!first_error.ok()) return first_error;
  fetch_done_.wait(lock,
                   [&] { return std::none_of(theirs.begin(), theirs.end(), [&](uint64_t ino) { return fetching_.count(ino) > 0; }); });
  return Status();
}

std::vector<std::optional<Result<std::string>>> Overlay::fetch_all_into_work(const std::vector<FetchRequest>& wants) const {
  std::vector<std::optional<Result<std::string>>> out(wants.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto worker = [&] {
    while (!failed.load()) {
      const size_t i = next.fetch_add(1);
      if (i >= wants.size()) return;
      out[i] = fetch_into_work(wants[i].lower_id, wants[i].size);
      if (!out[i]->ok()) failed = true;  // the operation fails: start no more
    }
  };
  const size_t threads = std::min(kParallelFetches, wants.size());
  {
    std::vector<std::jthread> helpers;  // joined at the end of the block, whatever happens
    for (size_t t = 1; t < threads; ++t) helpers.emplace_back(worker);
    worker();  // this thread is one of them: a single file needs no thread
  }
  return out;
}

void Overlay::discard_fetched(FetchSet& set) {
  // Fetched for a tree that changed meanwhile (the file was unlinked, or copied up by another
  // operation), or left by a failed batch: never renamed into upper/, so never visible.
  for (const auto& [ino, copy] : set.fetched) ::unlink(copy.tmp.c_str());
  set.fetched.clear();
}

std::optional<std::string> Overlay::take_fetched(const FetchRequest& want) {
  if (!fetches_) return std::nullopt;
  auto it = fetches_->fetched.find(want.ino);
  if (it == fetches_->fetched.end()) return std::nullopt;
  const FetchRequest& got = it->second.request;
  if (got.lower_id != want.lower_id || got.size != want.size) return std::nullopt;  // discarded at the end
  std::string tmp = std::move(it->second.tmp);
  fetches_->fetched.erase(it);
  return tmp;
}

bool Overlay::fetched_or_needed(const FetchRequest& want) {
  if (fetches_) {
    auto it = fetches_->fetched.find(want.ino);
    if (it != fetches_->fetched.end() && it->second.request.lower_id == want.lower_id && it->second.request.size == want.size) return true;
    fetches_->needed[want.ino] = want;
  }
  return false;
}

Status Overlay::copy_up_entry(const std::string& rel, EntryId lower_id, uint64_t ino, std::optional<uint64_t> size_limit) {
  const format::Entry e = lower_.index().entry(lower_id);
  const std::string dest = upper_path(rel);
  std::string tmp;
  if (e.type == format::EntryType::kSymlink) {
    LC_ASSIGN_OR_RETURN(Attr a, lower_.getattr(lower_id));
    const timespec mtime = to_timespec(a.mtime_ns);
    tmp = work_ + "/copy-" + std::to_string(temp_counter_.fetch_add(1) + 1);
    if (::symlink(std::string(e.symlink_target).c_str(), tmp.c_str()) != 0) return errno_error("symlink " + tmp);
    copy_xattrs_up(lower_.index(), e, tmp, -1);
    ::lchown(tmp.c_str(), a.uid, a.gid);
    timespec ts[2] = {mtime, mtime};
    ::utimensat(AT_FDCWD, tmp.c_str(), ts, AT_SYMLINK_NOFOLLOW);
  } else {
    const uint64_t size = std::min<uint64_t>(e.size, size_limit.value_or(e.size));
    const FetchRequest want{ino, lower_id, size};
    if (auto copy = take_fetched(want)) {
      tmp = std::move(*copy);
    } else if (size > 0) {
      // with_copy_up fetches it without mu_ and runs the operation again
      if (!fetches_) return Status(ErrorCode::kInternal, "copy-up of " + rel + " outside with_copy_up");
      fetched_or_needed(want);
      return Status(ErrorCode::kUnavailable, "copy-up of " + rel + " waits for its bytes");
    } else {
      LC_ASSIGN_OR_RETURN(tmp, fetch_into_work(lower_id, 0));  // no archive read: metadata only
    }
  }
  LC_RETURN_IF_ERROR(keeping_dir_times(upper_path(parent_of(rel)), [&]() -> Status {
    if (::rename(tmp.c_str(), dest.c_str()) != 0) {
      Status s = errno_error("rename " + tmp + " to " + dest);
      ::unlink(tmp.c_str());
      return s;
    }
    return Status();
  }));
  struct stat st;
  if (::lstat(dest.c_str(), &st) == 0) upper_ino_[static_cast<uint64_t>(st.st_ino)] = ino;
  page_cache_gate_.mark(ino);  // its bytes come from upper/ now (still the archive's: no wait)
  ++copy_ups_;
  // The other names of an archive hardlink group are the same file (and the same inode number
  // for the kernel): link them to the copy, so a write through any name shows through all.
  if (e.type == format::EntryType::kRegular && e.nlink > 1) LC_RETURN_IF_ERROR(link_group_up(lower_id, dest));
  // Descriptors opened on the archive copy now read the upper copy: one file, one content.
  if (auto it = nodes_.find(ino); it != nodes_.end() && e.type == format::EntryType::kRegular) {
    for (uint64_t h : it->second.handles) {
      Handle& hd = *handles_.at(h);
      std::lock_guard lock(hd.mu);
      if (hd.fd < 0) hd.fd = ::open(dest.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    }
  }
  return Status();
}

std::vector<std::string> Overlay::group_paths(EntryId canonical_id) const {
  const format::Index& index = lower_.index();
  const std::string top = index.path(root_);
  std::vector<std::string> out;
  for (EntryId id = 0; id < index.entry_count(); ++id) {
    const format::Entry m = index.entry(id);
    if (m.type != format::EntryType::kRegular || m.link_group != canonical_id) continue;
    std::string rel = index.path(id);
    if (!top.empty()) {
      if (rel.rfind(top + "/", 0) != 0) continue;  // outside this mount's directory
      rel = rel.substr(top.size() + 1);
    }
    out.push_back(std::move(rel));
  }
  return out;
}

bool Overlay::archive_path_visible(const std::string& rel) const {
  // Every parent must merge the archive's directory, and nothing may hide or shadow the name.
  std::string dir;
  size_t pos = 0;
  while (true) {
    const size_t slash = rel.find('/', pos);
    const std::string name = rel.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    struct stat st;
    if (whiteout(dir, name) || opaque(dir)) return false;
    if (slash == std::string::npos) return ::lstat(upper_path(rel).c_str(), &st) != 0;  // not up (or another file)
    dir = join(dir, name);
    if (::lstat(upper_path(dir).c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) return false;
    pos = slash + 1;
  }
}

Status Overlay::link_group_up(EntryId canonical_id, const std::string& copy) {
  const format::Index& index = lower_.index();
  const std::string top = index.path(root_);
  for (const std::string& rel : group_paths(canonical_id)) {
    if (!archive_path_visible(rel)) continue;
    // Create the parents as ensure_upper_dir would, from the archive's directories.
    std::string parent;
    size_t pos = 0;
    for (size_t slash; (slash = rel.find('/', pos)) != std::string::npos; pos = slash + 1) {
      parent = rel.substr(0, slash);
      auto pid = index.lookup_path(top.empty() ? parent : top + "/" + parent);
      if (!pid) break;
      LC_RETURN_IF_ERROR(ensure_upper_dir_path(parent, *pid, lower_ino(*pid)));
    }
    const std::string dest = upper_path(rel);
    LC_RETURN_IF_ERROR(keeping_dir_times(upper_path(parent_of(rel)), [&]() -> Status {
      if (::link(copy.c_str(), dest.c_str()) != 0) return errno_error("link " + dest);
      return Status();
    }));
  }
  return Status();
}

Result<std::vector<Overlay::ArchiveChild>> Overlay::archive_children_to_copy(const std::string& rel, EntryId lower_id) {
  std::vector<ArchiveChild> out;
  if (opaque(rel)) return out;
  LC_ASSIGN_OR_RETURN(auto kids, lower_.children(lower_id));
  std::set<std::string> hidden;
  for (const std::string& name : list_dir(upper_path(rel))) {  // empty when there is no upper dir
    if (reserved(name)) {
      if (name != kOpaqueMarker) hidden.insert(name.substr(kWhiteoutPrefix.size()));
    } else {
      hidden.insert(name);  // upper entry: already here (a directory below merges: handled next)
    }
  }
  for (uint32_t i = 0; i < kids.count; ++i) {
    const format::Entry child = lower_.index().entry(kids.first + i);
    const std::string name(child.name);
    std::string child_rel = join(rel, name);
    if (child.type == format::EntryType::kDirectory) {
      struct stat st;
      const bool in_upper = ::lstat(upper_path(child_rel).c_str(), &st) == 0;
      if (in_upper && !S_ISDIR(st.st_mode)) continue;  // replaced by an upper file
      if (!in_upper && hidden.count(name)) continue;   // whited out
      out.push_back({std::move(child_rel), child.id, true});
    } else if (!hidden.count(name)) {
      out.push_back({std::move(child_rel), child.id, false});
    }
  }
  return out;
}

Status Overlay::tree_bytes_ready(const std::string& rel, EntryId lower_id) {
  // Depth first with an explicit stack: an archive can nest deeper than a thread's stack likes.
  std::vector<std::pair<std::string, EntryId>> dirs{{rel, lower_id}};
  size_t missing = 0;
  while (!dirs.empty()) {
    auto [dir, dir_id] = std::move(dirs.back());
    dirs.pop_back();
    LC_ASSIGN_OR_RETURN(auto children, archive_children_to_copy(dir, dir_id));
    for (ArchiveChild& c : children) {
      if (c.dir) {
        dirs.emplace_back(std::move(c.rel), c.id);
        continue;
      }
      if (lower_.index().entry(c.id).type != format::EntryType::kRegular) continue;  // a symlink
      // Keyed as copy_up_tree will ask: a hardlink group's canonical entry, its inode number.
      const EntryId id = lower_.canonical(c.id);
      const uint64_t size = lower_.index().entry(id).size;
      if (size == 0) continue;  // made under mu_ without an archive read
      if (!fetched_or_needed(FetchRequest{lower_ino(id), id, size})) ++missing;
    }
  }
  if (missing == 0) return Status();
  if (!fetches_) return Status(ErrorCode::kInternal, "copy of " + rel + " outside with_copy_up");
  return Status(ErrorCode::kUnavailable, "copy of " + rel + " waits for the bytes of " + std::to_string(missing) + " files");
}

Status Overlay::copy_up_tree(const std::string& rel, EntryId lower_id, uint64_t ino) {
  LC_RETURN_IF_ERROR(ensure_upper_dir_path(rel, lower_id, ino));
  if (opaque(rel)) return Status();  // nothing of the archive shows below it
  LC_ASSIGN_OR_RETURN(auto children, archive_children_to_copy(rel, lower_id));
  for (const ArchiveChild& c : children) {
    if (c.dir) {
      LC_RETURN_IF_ERROR(copy_up_tree(c.rel, c.id, lower_ino(c.id)));
      continue;
    }
    // Another name of a hardlink group copied just before links this one up (link_group_up).
    struct stat st;
    if (::lstat(upper_path(c.rel).c_str(), &st) == 0) continue;
    const EntryId id = lower_.canonical(c.id);
    LC_RETURN_IF_ERROR(copy_up_entry(c.rel, id, lower_ino(id), std::nullopt));
  }
  const std::string dir = upper_path(rel);
  LC_RETURN_IF_ERROR(keeping_dir_times(dir, [&] { return make_whiteout(rel, ""); }));
  // No archive directory merges with the copy any more. An implicit directory the kernel knows
  // below the renamed one becomes a Node to say so (its number stays the archive entry's).
  const bool known = nodes_.count(ino) != 0 || (archive_place(ino) && archive_lookups_[inodes_.entry(ino)] > 0);
  if (known) materialize(ino).lower.reset();
  return Status();
}

}  // namespace lazycache::fs
