// SPDX-License-Identifier: MIT
// File: fs/overlay_files.cpp -- open files: handles, open/create, read/write/fsync/release, setattr.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <future>

#include "fs/overlay.h"
#include "fs/overlay_internal.h"

namespace lazycache::fs {
using namespace overlay_detail;

namespace {

int upper_open_flags(int flags) {
  // The kernel already handled O_CREAT/O_EXCL/O_NOCTTY; O_DIRECT is the kernel's business, not
  // the upper file system's (tmpfs refuses it).
  return (flags & (O_ACCMODE | O_APPEND | O_TRUNC | O_SYNC | O_DSYNC | O_NOATIME)) | O_CLOEXEC | O_NOFOLLOW;
}

}  // namespace

Overlay::Handle::~Handle() {
  if (fd >= 0) ::close(fd);
  if (lower_handle) lower.release(*lower_handle);
}

Result<std::shared_ptr<Overlay::Handle>> Overlay::handle(uint64_t h) {
  auto it = handles_.find(h);
  if (it == handles_.end()) return sys_error(EBADF, "unknown file handle");
  return it->second;
}

Result<uint64_t> Overlay::open(uint64_t ino, int flags, bool* keep_cache) {
  // Before the lock (fs/page_cache_gate.h): the content may change from here on, so no archive
  // bytes may reach the kernel's page cache for this inode any more.
  if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)) page_cache_gate_.cut_off(ino);
  return with_copy_up([&]() -> Result<uint64_t> {
    LC_ASSIGN_OR_RETURN(NodeView n, node(ino));
    LC_ASSIGN_OR_RETURN(struct stat st, stat_of(ino));
    if (S_ISDIR(st.st_mode)) return sys_error(EISDIR, "open of a directory");
    const bool writing = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
    if (writing) LC_RETURN_IF_ERROR(copy_up(ino, (flags & O_TRUNC) ? std::optional<uint64_t>(0) : std::nullopt));
    LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
    auto h = std::make_shared<Handle>(lower_);
    h->ino = ino;
    h->flags = flags;
    // An archive file opened for reading in a directory that has no upper one (no_upper_dir_, as
    // stat_of has it): nothing in upper/ to try. A writable mount gets an OPEN per open(2), and
    // this open(2) of upper/ failed with ENOENT for nearly all of them (node's job: ~4,000).
    const bool upper_absent = !writing && n.lower && n.parent != 0 && no_upper_dir_.count(n.parent) != 0;
    const std::string path = upper_path(rel);
    h->fd = upper_absent ? -1 : ::open(path.c_str(), upper_open_flags(flags));
    if (h->fd < 0) {
      if ((!upper_absent && errno != ENOENT) || !n.lower || writing) return errno_error("open " + path);
      LC_ASSIGN_OR_RETURN(uint64_t lh, lower_.open(*n.lower, O_RDONLY));
      h->lower_handle = lh;
    }
    if (keep_cache != nullptr) *keep_cache = h->lower_handle.has_value();
    const uint64_t id = next_handle_++;
    materialize(ino).handles.push_back(id);  // a Node while open: copy-up switches its handles
    handles_.emplace(id, std::move(h));
    return id;
  });
}

Result<std::pair<OverlayEntry, uint64_t>> Overlay::create(uint64_t parent, std::string_view name, uint32_t mode, int flags,
                                                          const Caller& who) {
  OverlayEntry entry;
  {
    std::lock_guard lock(mu_);
    LC_ASSIGN_OR_RETURN(Resolved r, resolve(parent, name));
    if (r.exists && (flags & O_EXCL)) return sys_error(EEXIST, std::string(name));
    if (!r.exists) {
      LC_ASSIGN_OR_RETURN(entry, create_empty_file(parent, name, mode, who));
    }
  }
  if (entry.ino == 0) {  // it appeared since the kernel's lookup: open it as open(2) would
    LC_ASSIGN_OR_RETURN(entry, lookup(parent, name));
  }
  // A new file may reuse the number of an archive file whited out at that name.
  page_cache_gate_.cut_off(entry.ino);
  auto h = open(entry.ino, flags & ~(O_CREAT | O_EXCL));
  if (!h.ok()) {
    forget(entry.ino, 1);
    return h.error();
  }
  LC_ASSIGN_OR_RETURN(entry.st, getattr(entry.ino));
  return std::make_pair(entry, *h);
}

void Overlay::read(uint64_t handle_id, uint64_t offset, size_t size, ReadCallback cb) {
  std::shared_ptr<Handle> h;
  {
    std::lock_guard lock(mu_);
    auto r = handle(handle_id);
    if (!r.ok()) return cb(r.error());
    h = std::move(r).value();
  }
  std::unique_lock hl(h->mu);
  if (h->fd >= 0) {
    auto buf = std::make_shared<FrameBytes>(size);  // shrunk below to the bytes read
    size_t got = 0;
    while (got < size) {
      ssize_t n = ::pread(h->fd, buf->data() + got, size - got, static_cast<off_t>(offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return cb(errno_error("read"));
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    hl.unlock();
    buf->resize(got);
    std::vector<ReadPiece> pieces;
    if (got > 0) pieces.push_back(ReadPiece{std::move(buf), 0, got});
    return cb(std::move(pieces));
  }
  const uint64_t lower_handle = *h->lower_handle;
  hl.unlock();
  lower_.read(lower_handle, offset, size, std::move(cb));
}

Result<std::string> Overlay::read_sync(uint64_t handle_id, uint64_t offset, size_t size) {
  std::promise<Result<std::vector<ReadPiece>>> done;
  auto fut = done.get_future();
  read(handle_id, offset, size, [&done](Result<std::vector<ReadPiece>> r) { done.set_value(std::move(r)); });
  auto r = fut.get();
  if (!r.ok()) return r.error();
  std::string out;
  for (const ReadPiece& p : *r) out.append(p.frame->data() + p.offset, p.length);
  return out;
}

Result<size_t> Overlay::write(uint64_t handle_id, std::span<const char> data, uint64_t offset) {
  std::shared_ptr<Handle> h;
  {
    std::lock_guard lock(mu_);
    LC_ASSIGN_OR_RETURN(h, handle(handle_id));
  }
  std::lock_guard hl(h->mu);
  if (h->fd < 0 || (h->flags & O_ACCMODE) == O_RDONLY) return sys_error(EBADF, "file not open for writing");
  ssize_t n;
  do {
    n = ::pwrite(h->fd, data.data(), data.size(), static_cast<off_t>(offset));
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno_error("write");
  return static_cast<size_t>(n);
}

Status Overlay::fsync(uint64_t handle_id, bool datasync) {
  std::shared_ptr<Handle> h;
  {
    std::lock_guard lock(mu_);
    LC_ASSIGN_OR_RETURN(h, handle(handle_id));
  }
  std::lock_guard hl(h->mu);
  if (h->fd < 0) return Status();  // archive bytes are durable already
  if ((datasync ? ::fdatasync(h->fd) : ::fsync(h->fd)) != 0) return errno_error("fsync");
  return Status();
}

void Overlay::release(uint64_t handle_id) {
  std::shared_ptr<Handle> h;  // the last reference closes the descriptor and the archive handle
  {
    std::lock_guard lock(mu_);
    auto it = handles_.find(handle_id);
    if (it == handles_.end()) return;
    h = std::move(it->second);
    handles_.erase(it);
    if (auto n = nodes_.find(h->ino); n != nodes_.end()) {
      auto& hs = n->second.handles;
      hs.erase(std::remove(hs.begin(), hs.end(), handle_id), hs.end());
      settle(n);
    }
  }
}

Result<struct stat> Overlay::setattr(uint64_t ino, const SetAttr& attr, std::optional<uint64_t> handle_id) {
  if (attr.size) page_cache_gate_.cut_off(ino);  // a truncate changes the content: before the lock
  return with_copy_up([&]() -> Result<struct stat> {
    LC_ASSIGN_OR_RETURN(struct stat before, stat_of(ino));
    int fd = -1;
    if (handle_id) {
      if (auto h = handle(*handle_id); h.ok()) fd = (*h)->fd;
    }
    std::string path;
    if (fd < 0) {
      if (S_ISDIR(before.st_mode)) LC_RETURN_IF_ERROR(ensure_upper_dir(ino));
      else LC_RETURN_IF_ERROR(copy_up(ino, attr.size));
      LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
      path = upper_path(rel);
    }
    if (attr.mode && !S_ISLNK(before.st_mode)) {
      if ((fd >= 0 ? ::fchmod(fd, *attr.mode & 07777) : ::chmod(path.c_str(), *attr.mode & 07777)) != 0) {
        return errno_error("chmod");
      }
    }
    if (attr.uid || attr.gid) {
      const uid_t u = attr.uid ? *attr.uid : static_cast<uid_t>(-1);
      const gid_t g = attr.gid ? *attr.gid : static_cast<gid_t>(-1);
      if ((fd >= 0 ? ::fchown(fd, u, g) : ::lchown(path.c_str(), u, g)) != 0) return errno_error("chown");
    }
    if (attr.size) {
      if ((fd >= 0 ? ::ftruncate(fd, static_cast<off_t>(*attr.size)) : ::truncate(path.c_str(), static_cast<off_t>(*attr.size))) != 0) {
        return errno_error("truncate");
      }
    }
    if (attr.atime || attr.mtime) {
      timespec ts[2];
      ts[0] = attr.atime ? *attr.atime : timespec{0, UTIME_OMIT};
      ts[1] = attr.mtime ? *attr.mtime : timespec{0, UTIME_OMIT};
      if ((fd >= 0 ? ::futimens(fd, ts) : ::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW)) != 0) {
        return errno_error("utimens");
      }
    }
    return stat_of(ino);
  });
}

}  // namespace lazycache::fs
