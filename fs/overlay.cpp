// SPDX-License-Identifier: MIT
#include "fs/overlay.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <future>
#include <set>

#include "fs/local_files.h"

namespace lazycache::fs {
namespace {

constexpr std::string_view kWhiteoutPrefix = ".wh.";
constexpr const char* kOpaqueMarker = ".wh..wh..opq";
// 4 MiB: one archive frame; copy-up reads the file through the frame caches in these steps.
constexpr size_t kCopyChunk = 4u << 20;

Status sys_error(int err, const std::string& what) { return Status(ErrorCode::kIo, what + ": " + std::strerror(err), err); }
Status errno_error(const std::string& what) { return sys_error(errno, what); }

bool reserved(std::string_view name) { return name.substr(0, kWhiteoutPrefix.size()) == kWhiteoutPrefix; }

std::string join(const std::string& dir, std::string_view name) {
  return dir.empty() ? std::string(name) : dir + "/" + std::string(name);
}

std::string parent_of(const std::string& rel) {
  auto slash = rel.rfind('/');
  return slash == std::string::npos ? std::string() : rel.substr(0, slash);
}

// The archive entry's xattrs onto its upper copy at `path` (or the open `fd`, when >= 0), best
// effort as tar does: a copy-up must not drop them, or the merged view (and the next save)
// would lose them the moment a directory gains a child or a file is written.
void copy_xattrs_up(const format::Index& index, const format::Entry& e, const std::string& path, int fd) {
  if (!e.has_xattrs) return;
  for (const auto& x : index.xattrs(e.id)) {
    if (fd >= 0) ::fsetxattr(fd, x.name.c_str(), x.value.data(), x.value.size(), 0);
    else ::lsetxattr(path.c_str(), x.name.c_str(), x.value.data(), x.value.size(), 0);
  }
}

Status write_all(int fd, const char* data, size_t size, const std::string& what) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(what);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status();
}

timespec to_timespec(int64_t ns) {
  timespec t{ns / 1000000000, ns % 1000000000};
  if (t.tv_nsec < 0) {
    t.tv_nsec += 1000000000;
    t.tv_sec -= 1;
  }
  return t;
}

// Runs `fn`, which adds or renames an entry inside `dir`, then puts back the directory's times:
// copy-up and whiteout bookkeeping must not look like a change of the directory itself.
template <typename F>
Status keeping_dir_times(const std::string& dir, F&& fn) {
  struct stat before;
  const bool have = ::lstat(dir.c_str(), &before) == 0;
  Status s = fn();
  if (have) {
    timespec ts[2] = {before.st_atim, before.st_mtim};
    ::utimensat(AT_FDCWD, dir.c_str(), ts, AT_SYMLINK_NOFOLLOW);
  }
  return s;
}

uint32_t type_of(format::EntryType t) {
  switch (t) {
    case format::EntryType::kDirectory: return S_IFDIR;
    case format::EntryType::kSymlink: return S_IFLNK;
    case format::EntryType::kRegular: return S_IFREG;
  }
  return S_IFREG;
}

int upper_open_flags(int flags) {
  // The kernel already handled O_CREAT/O_EXCL/O_NOCTTY; O_DIRECT is the kernel's business, not
  // the upper file system's (tmpfs refuses it).
  return (flags & (O_ACCMODE | O_APPEND | O_TRUNC | O_SYNC | O_DSYNC | O_NOATIME)) | O_CLOEXEC | O_NOFOLLOW;
}

}  // namespace

struct Overlay::Handle {
  uint64_t ino = 0;
  int flags = 0;
  std::mutex mu;  // guards fd (set when a lower file is copied up under an open handle)
  int fd = -1;
  std::optional<uint64_t> lower_handle;  // released only in release(): reads may be in flight
};

Overlay::Overlay(Filesystem& lower, EntryId root, OverlayConfig config)
    : lower_(lower), root_(root), config_(std::move(config)) {
  upper_ = config_.state_dir + "/upper";
  work_ = config_.state_dir + "/work";
  next_ino_ = static_cast<uint64_t>(lower_.index().entry_count()) + 2;
  Node& r = nodes_[kRootIno];
  r.nlookup = 1;
  r.lower = root_;
}

Result<std::unique_ptr<Overlay>> Overlay::open(Filesystem& lower, EntryId root, OverlayConfig config) {
  if (root >= lower.index().entry_count() || lower.index().entry(root).type != format::EntryType::kDirectory) {
    return Status(ErrorCode::kInvalidArgument, "overlay root is not a directory of the archive");
  }
  if (config.state_dir.empty()) return Status(ErrorCode::kInvalidArgument, "overlay needs a state directory");
  std::unique_ptr<Overlay> o(new Overlay(lower, root, std::move(config)));
  LC_RETURN_IF_ERROR(make_dirs(o->upper_).with_context("creating the upper directory"));
  LC_RETURN_IF_ERROR(make_dirs(o->work_).with_context("creating the work directory"));
  // Leftovers of a copy-up cut short by a crash: never renamed into upper/, so never visible.
  for (const std::string& name : list_dir(o->work_)) ::unlink((o->work_ + "/" + name).c_str());
  // A fresh upper root shows the archive root's mode, owner and mtime until the job changes them.
  if (list_dir(o->upper_).empty()) {
    LC_ASSIGN_OR_RETURN(Attr a, lower.getattr(root));
    if (::lchown(o->upper_.c_str(), a.uid, a.gid) != 0 && geteuid() == 0) return errno_error("chown " + o->upper_);
    if (::chmod(o->upper_.c_str(), a.mode & 07777) != 0) return errno_error("chmod " + o->upper_);
    timespec ts[2] = {to_timespec(a.mtime_ns), to_timespec(a.mtime_ns)};
    ::utimensat(AT_FDCWD, o->upper_.c_str(), ts, AT_SYMLINK_NOFOLLOW);
  }
  struct stat st;
  if (::lstat(o->upper_.c_str(), &st) == 0) o->upper_ino_[static_cast<uint64_t>(st.st_ino)] = kRootIno;
  return o;
}

Overlay::~Overlay() {
  for (auto& [id, h] : handles_) {
    if (h->fd >= 0) ::close(h->fd);
    if (h->lower_handle) lower_.release(*h->lower_handle);
  }
}

bool Overlay::changed() const {
  std::lock_guard lock(mu_);
  return !list_dir(upper_).empty();
}

uint64_t Overlay::copy_ups() const {
  std::lock_guard lock(mu_);
  return copy_ups_;
}

uint64_t Overlay::lower_ino(EntryId id) const {
  return id == root_ ? kRootIno : static_cast<uint64_t>(lower_.canonical(id)) + 2;
}

Result<Overlay::Node*> Overlay::node(uint64_t ino) {
  auto it = nodes_.find(ino);
  if (it == nodes_.end()) return Status(ErrorCode::kNotFound, "unknown inode " + std::to_string(ino));
  return &it->second;
}

Result<std::string> Overlay::path_of(uint64_t ino) {
  std::vector<const std::string*> parts;
  for (int depth = 0; ino != kRootIno; ++depth) {
    auto it = nodes_.find(ino);
    if (it == nodes_.end() || it->second.links.empty() || depth > 4096) {
      return Status(ErrorCode::kNotFound, "inode " + std::to_string(ino) + " has no name any more");
    }
    parts.push_back(&it->second.links.front().second);
    ino = it->second.links.front().first;
  }
  std::string out;
  for (auto p = parts.rbegin(); p != parts.rend(); ++p) {
    if (!out.empty()) out += '/';
    out += **p;
  }
  return out;
}

bool Overlay::opaque(const std::string& rel) const {
  struct stat st;
  return ::lstat((upper_path(rel) + "/" + kOpaqueMarker).c_str(), &st) == 0;
}

bool Overlay::whiteout(const std::string& rel_dir, std::string_view name) const {
  struct stat st;
  return ::lstat((upper_path(rel_dir) + "/" + std::string(kWhiteoutPrefix) + std::string(name)).c_str(), &st) == 0;
}

Result<Overlay::Resolved> Overlay::resolve(uint64_t parent, std::string_view name) {
  LC_ASSIGN_OR_RETURN(Node * pn, node(parent));
  LC_ASSIGN_OR_RETURN(std::string dir, path_of(parent));
  Resolved r;
  if (reserved(name) || name.empty() || name == "." || name == "..") return r;
  const std::string rel = join(dir, name);
  // Most directories of a mounted cache are never written: when the parent has no upper
  // directory there can be no upper entry, whiteout or opaque marker in it, and one lstat
  // answers what would take three (a find over 30,000 entries pays this on every lookup).
  struct stat dir_st;
  if (pn->lower && ::lstat(upper_path(dir).c_str(), &dir_st) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
    if (auto id = lower_.index().lookup(*pn->lower, name)) {
      r.exists = true;
      r.lower = lower_.canonical(*id);
    }
    return r;
  }
  // The archive entry at this path, if the parent still merges with the archive.
  std::optional<EntryId> below;
  if (pn->lower && !opaque(dir)) {
    if (auto id = lower_.index().lookup(*pn->lower, name)) below = lower_.canonical(*id);
  }
  if (::lstat(upper_path(rel).c_str(), &r.st) == 0) {
    r.exists = r.upper = true;
    if (below && S_ISDIR(r.st.st_mode) && lower_.index().entry(*below).type == format::EntryType::kDirectory &&
        !opaque(rel)) {
      r.lower = below;
    } else if (below && (r.st.st_mode & S_IFMT) == type_of(lower_.index().entry(*below).type)) {
      // Same kind of entry at the same path: its number, if this upper entry has none yet.
      r.lower_behind = below;
    }
    return r;
  }
  if (errno != ENOENT && errno != ENOTDIR) return errno_error("lstat " + upper_path(rel));
  if (below && !whiteout(dir, name)) {
    r.exists = true;
    r.lower = below;
  }
  return r;
}

uint64_t Overlay::ino_for(const Resolved& r) {
  if (!r.upper) return lower_ino(*r.lower);
  auto key = static_cast<uint64_t>(r.st.st_ino);
  if (auto it = upper_ino_.find(key); it != upper_ino_.end()) return it->second;
  const uint64_t ino = r.lower ? lower_ino(*r.lower) : r.lower_behind ? lower_ino(*r.lower_behind) : next_ino_++;
  upper_ino_[key] = ino;
  return ino;
}

void Overlay::forget_upper_inode(const struct stat& st) {
  if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) return;  // other names still use the number
  upper_ino_.erase(static_cast<uint64_t>(st.st_ino));
}

Result<struct stat> Overlay::lower_stat(EntryId id, uint64_t ino) const {
  LC_ASSIGN_OR_RETURN(Attr a, lower_.getattr(id));
  struct stat st;
  std::memset(&st, 0, sizeof(st));
  st.st_ino = ino;
  st.st_mode = a.mode;
  st.st_nlink = a.nlink;
  st.st_uid = a.uid;
  st.st_gid = a.gid;
  st.st_size = static_cast<off_t>(a.size);
  st.st_blksize = 4096;
  st.st_blocks = static_cast<blkcnt_t>((a.size + 511) / 512);
  st.st_mtim = to_timespec(a.mtime_ns);
  st.st_atim = st.st_mtim;
  st.st_ctim = st.st_mtim;
  return st;
}

Result<struct stat> Overlay::stat_of(uint64_t ino) {
  LC_ASSIGN_OR_RETURN(Node * n, node(ino));
  struct stat st;
  auto rel = path_of(ino);
  if (rel.ok()) {
    if (::lstat(upper_path(*rel).c_str(), &st) == 0) {
      st.st_ino = ino;
      if (S_ISDIR(st.st_mode) && n->lower && !opaque(*rel)) {
        // 2 + subdirectories of the merged view, as on disk: find's leaf optimisation trusts it.
        LC_ASSIGN_OR_RETURN(auto kids, list_at(*rel, true, n->lower));
        st.st_nlink = 2 + static_cast<nlink_t>(std::count_if(kids.begin(), kids.end(), [](const DirEntryInfo& k) { return k.type == S_IFDIR; }));
      }
      return st;
    }
    if (n->lower) return lower_stat(*n->lower, ino);
  }
  for (uint64_t h : n->handles) {  // unlinked but open: the descriptor still knows it
    Handle& hd = *handles_.at(h);
    std::lock_guard lock(hd.mu);
    if (hd.fd >= 0 && ::fstat(hd.fd, &st) == 0) {
      st.st_ino = ino;
      return st;
    }
    if (n->lower) return lower_stat(*n->lower, ino);
  }
  return Status(ErrorCode::kNotFound, "inode " + std::to_string(ino) + " is gone");
}

OverlayEntry Overlay::remember(uint64_t ino, uint64_t parent, std::string_view name, std::optional<EntryId> lower,
                               const struct stat& st) {
  const auto key = std::make_pair(parent, std::string(name));
  if (auto it = names_.find(key); it != names_.end() && it->second != ino) drop_link(parent, name);
  Node& n = nodes_[ino];
  if (std::find(n.links.begin(), n.links.end(), key) == n.links.end()) n.links.push_back(key);
  names_[key] = ino;
  n.nlookup += 1;
  if (lower) n.lower = lower;
  OverlayEntry e;
  e.ino = ino;
  e.st = st;
  e.st.st_ino = ino;
  return e;
}

void Overlay::drop_link(uint64_t parent, std::string_view name) {
  const auto key = std::make_pair(parent, std::string(name));
  auto it = names_.find(key);
  if (it == names_.end()) return;
  if (auto n = nodes_.find(it->second); n != nodes_.end()) {
    auto& links = n->second.links;
    links.erase(std::remove(links.begin(), links.end(), key), links.end());
  }
  names_.erase(it);
}

Result<OverlayEntry> Overlay::lookup(uint64_t parent, std::string_view name) {
  std::lock_guard lock(mu_);
  LC_ASSIGN_OR_RETURN(Resolved r, resolve(parent, name));
  if (!r.exists) return Status(ErrorCode::kNotFound, std::string(name) + " not found");
  const uint64_t ino = ino_for(r);
  struct stat st = r.st;
  if (!r.upper) {
    LC_ASSIGN_OR_RETURN(st, lower_stat(*r.lower, ino));
  }
  return remember(ino, parent, name, r.lower, st);
}

void Overlay::forget(uint64_t ino, uint64_t nlookup) {
  std::lock_guard lock(mu_);
  if (ino == kRootIno) return;
  auto it = nodes_.find(ino);
  if (it == nodes_.end()) return;
  Node& n = it->second;
  n.nlookup = nlookup >= n.nlookup ? 0 : n.nlookup - nlookup;
  if (n.nlookup > 0 || !n.handles.empty()) return;
  for (const auto& link : n.links) {
    if (auto nm = names_.find(link); nm != names_.end() && nm->second == ino) names_.erase(nm);
  }
  nodes_.erase(it);
}

Result<struct stat> Overlay::getattr(uint64_t ino) {
  std::lock_guard lock(mu_);
  return stat_of(ino);
}

Result<std::string> Overlay::readlink(uint64_t ino) {
  std::lock_guard lock(mu_);
  LC_ASSIGN_OR_RETURN(Node * n, node(ino));
  LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
  char buf[PATH_MAX + 1];
  ssize_t len = ::readlink(upper_path(rel).c_str(), buf, PATH_MAX);
  if (len >= 0) return std::string(buf, static_cast<size_t>(len));
  if (errno != ENOENT || !n->lower) return errno_error("readlink " + rel);
  return lower_.readlink(*n->lower);
}

Status Overlay::ensure_upper_dir_path(const std::string& rel, EntryId lower_id, uint64_t ino) {
  const std::string path = upper_path(rel);
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? Status() : sys_error(ENOTDIR, path);
  LC_ASSIGN_OR_RETURN(Attr a, lower_.getattr(lower_id));
  LC_RETURN_IF_ERROR(keeping_dir_times(upper_path(parent_of(rel)), [&]() -> Status {
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
  LC_ASSIGN_OR_RETURN(Node * n, node(ino));
  LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
  struct stat st;
  if (::lstat(upper_path(rel).c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? Status() : sys_error(ENOTDIR, rel);
  if (!n->lower) return Status(ErrorCode::kNotFound, rel + " is gone");
  const uint64_t parent = n->links.front().first;
  const EntryId lower_id = *n->lower;
  LC_RETURN_IF_ERROR(ensure_upper_dir(parent));
  return ensure_upper_dir_path(rel, lower_id, ino);
}

Status Overlay::copy_up(uint64_t ino, std::optional<uint64_t> size_limit) {
  LC_ASSIGN_OR_RETURN(Node * n, node(ino));
  LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
  struct stat st;
  if (::lstat(upper_path(rel).c_str(), &st) == 0) return Status();
  if (!n->lower) return Status(ErrorCode::kNotFound, rel + " is gone");
  const EntryId lower_id = *n->lower;
  if (lower_.index().entry(lower_id).type == format::EntryType::kDirectory) return ensure_upper_dir(ino);
  LC_RETURN_IF_ERROR(ensure_upper_dir(n->links.front().first));
  return copy_up_entry(rel, lower_id, ino, size_limit);
}

Status Overlay::copy_up_entry(const std::string& rel, EntryId lower_id, uint64_t ino, std::optional<uint64_t> size_limit) {
  const format::Entry e = lower_.index().entry(lower_id);
  LC_ASSIGN_OR_RETURN(Attr a, lower_.getattr(lower_id));
  const std::string tmp = work_ + "/copy-" + std::to_string(++temp_counter_);
  const std::string dest = upper_path(rel);
  const timespec mtime = to_timespec(a.mtime_ns);
  if (e.type == format::EntryType::kSymlink) {
    if (::symlink(std::string(e.symlink_target).c_str(), tmp.c_str()) != 0) return errno_error("symlink " + tmp);
    copy_xattrs_up(lower_.index(), e, tmp, -1);
    ::lchown(tmp.c_str(), a.uid, a.gid);
    timespec ts[2] = {mtime, mtime};
    ::utimensat(AT_FDCWD, tmp.c_str(), ts, AT_SYMLINK_NOFOLLOW);
  } else {
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return errno_error("create " + tmp);
    auto fail = [&](Status s) {
      ::close(fd);
      ::unlink(tmp.c_str());
      return s.with_context("copying " + rel + " up from the archive");
    };
    const uint64_t size = std::min<uint64_t>(a.size, size_limit.value_or(a.size));
    if (size > 0) {
      LC_ASSIGN_OR_RETURN(uint64_t h, lower_.open(lower_id, O_RDONLY));
      Status s;
      for (uint64_t off = 0; off < size && s.ok(); off += kCopyChunk) {
        auto bytes = lower_.read_sync(h, off, static_cast<size_t>(std::min<uint64_t>(kCopyChunk, size - off)));
        if (!bytes.ok()) s = bytes.error();
        else if (bytes->empty()) s = Status(ErrorCode::kCorrupt, "archive file shorter than its index says");
        else s = write_all(fd, bytes->data(), bytes->size(), "write " + tmp);
      }
      lower_.release(h);
      if (!s.ok()) return fail(s);
    }
    copy_xattrs_up(lower_.index(), e, tmp, fd);
    if (::fchown(fd, a.uid, a.gid) != 0 && geteuid() == 0) return fail(errno_error("chown " + tmp));
    if (::fchmod(fd, a.mode & 07777) != 0) return fail(errno_error("chmod " + tmp));
    timespec ts[2] = {mtime, mtime};
    ::futimens(fd, ts);
    ::close(fd);
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

Status Overlay::link_group_up(EntryId canonical_id, const std::string& copy) {
  const format::Index& index = lower_.index();
  const std::string top = index.path(root_);
  for (EntryId id = 0; id < index.entry_count(); ++id) {
    const format::Entry m = index.entry(id);
    if (m.type != format::EntryType::kRegular || m.link_group != canonical_id) continue;
    std::string rel = index.path(id);
    if (!top.empty()) {
      if (rel.rfind(top + "/", 0) != 0) continue;  // outside this mount's directory
      rel = rel.substr(top.size() + 1);
    }
    // Still visible at its archive path? Every parent must merge the archive's directory.
    bool visible = true;
    std::string dir;
    size_t pos = 0;
    while (visible) {
      const size_t slash = rel.find('/', pos);
      const std::string name = rel.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
      struct stat st;
      if (whiteout(dir, name) || opaque(dir)) visible = false;
      if (slash == std::string::npos) {
        if (::lstat(upper_path(rel).c_str(), &st) == 0) visible = false;  // already up (maybe this copy)
        break;
      }
      dir = join(dir, name);
      if (::lstat(upper_path(dir).c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) visible = false;
      pos = slash + 1;
    }
    if (!visible) continue;
    // Create the parents as ensure_upper_dir would, from the archive's directories.
    std::string parent;
    pos = 0;
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

Status Overlay::copy_up_tree(const std::string& rel, EntryId lower_id, uint64_t ino) {
  LC_RETURN_IF_ERROR(ensure_upper_dir_path(rel, lower_id, ino));
  LC_ASSIGN_OR_RETURN(auto kids, lower_.children(lower_id));
  std::set<std::string> hidden;
  const std::string dir = upper_path(rel);
  for (const std::string& name : list_dir(dir)) {
    if (reserved(name)) {
      if (name != kOpaqueMarker) hidden.insert(name.substr(kWhiteoutPrefix.size()));
    } else {
      hidden.insert(name);  // upper entry: already here (a directory below merges: handled next)
    }
  }
  if (opaque(rel)) return Status();
  for (uint32_t i = 0; i < kids.count; ++i) {
    const format::Entry child = lower_.index().entry(kids.first + i);
    const std::string name(child.name);
    const std::string child_rel = join(rel, name);
    struct stat st;
    const bool in_upper = ::lstat(upper_path(child_rel).c_str(), &st) == 0;
    if (child.type == format::EntryType::kDirectory) {
      if (in_upper && !S_ISDIR(st.st_mode)) continue;
      if (!in_upper && hidden.count(name)) continue;  // whited out
      LC_RETURN_IF_ERROR(copy_up_tree(child_rel, child.id, lower_ino(child.id)));
    } else if (!hidden.count(name)) {
      const EntryId id = lower_.canonical(child.id);
      LC_RETURN_IF_ERROR(copy_up_entry(child_rel, id, lower_ino(id), std::nullopt));
    }
  }
  LC_RETURN_IF_ERROR(keeping_dir_times(dir, [&] { return make_whiteout(rel, ""); }));
  if (auto it = nodes_.find(ino); it != nodes_.end()) it->second.lower.reset();
  return Status();
}

Status Overlay::make_whiteout(const std::string& rel_dir, std::string_view name) {
  // An empty name makes the directory opaque.
  const std::string marker = upper_path(rel_dir) + "/" + (name.empty() ? std::string(kOpaqueMarker) : std::string(kWhiteoutPrefix) + std::string(name));
  int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return errno_error("create whiteout " + marker);
  ::close(fd);
  return Status();
}

Status Overlay::clear_whiteout(const std::string& rel_dir, std::string_view name) {
  const std::string marker = upper_path(rel_dir) + "/" + std::string(kWhiteoutPrefix) + std::string(name);
  if (::unlink(marker.c_str()) != 0 && errno != ENOENT) return errno_error("remove whiteout " + marker);
  return Status();
}

Status Overlay::prepare_new_name(uint64_t parent, std::string_view name, bool* had_whiteout) {
  if (reserved(name)) return sys_error(EPERM, std::string(name) + " is a reserved name in a lazycache mount");
  if (name.size() > 255) return sys_error(ENAMETOOLONG, std::string(name));
  LC_ASSIGN_OR_RETURN(Resolved r, resolve(parent, name));
  if (r.exists) return sys_error(EEXIST, std::string(name));
  LC_ASSIGN_OR_RETURN(Node * pn, node(parent));
  (void)pn;
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
  std::lock_guard lock(mu_);
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
}

Status Overlay::unlink(uint64_t parent, std::string_view name) {
  std::lock_guard lock(mu_);
  LC_ASSIGN_OR_RETURN(Resolved r, resolve(parent, name));
  if (!r.exists) return sys_error(ENOENT, std::string(name));
  const bool is_dir = r.upper ? S_ISDIR(r.st.st_mode) : lower_.index().entry(*r.lower).type == format::EntryType::kDirectory;
  if (is_dir) return sys_error(EISDIR, std::string(name));
  LC_RETURN_IF_ERROR(ensure_upper_dir(parent));
  LC_ASSIGN_OR_RETURN(std::string dir, path_of(parent));
  LC_ASSIGN_OR_RETURN(Node * pn, node(parent));
  const bool in_archive = pn->lower && !opaque(dir) && lower_.index().lookup(*pn->lower, name).has_value();
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
  LC_ASSIGN_OR_RETURN(Node * pn, node(parent));
  const bool in_archive = pn->lower && !opaque(dir) && lower_.index().lookup(*pn->lower, name).has_value();
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
  std::lock_guard lock(mu_);
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
  if (::rename(from.c_str(), to.c_str()) != 0) return errno_error("rename " + from + " to " + to);
  LC_RETURN_IF_ERROR(clear_whiteout(dst_dir, new_name));
  if (src_is_dir && dst_lower_dir && !opaque(dst_rel)) LC_RETURN_IF_ERROR(make_whiteout(dst_rel, ""));
  LC_ASSIGN_OR_RETURN(Node * pn, node(parent));
  if (pn->lower && !opaque(src_dir) && lower_.index().lookup(*pn->lower, name).has_value()) {
    LC_RETURN_IF_ERROR(make_whiteout(src_dir, name));
  }
  drop_link(new_parent, new_name);
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

Result<Overlay::Handle*> Overlay::handle(uint64_t h) {
  auto it = handles_.find(h);
  if (it == handles_.end()) return sys_error(EBADF, "unknown file handle");
  return it->second.get();
}

Result<uint64_t> Overlay::open(uint64_t ino, int flags, bool* keep_cache) {
  std::lock_guard lock(mu_);
  LC_ASSIGN_OR_RETURN(Node * n, node(ino));
  LC_ASSIGN_OR_RETURN(struct stat st, stat_of(ino));
  if (S_ISDIR(st.st_mode)) return sys_error(EISDIR, "open of a directory");
  const bool writing = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
  if (writing) LC_RETURN_IF_ERROR(copy_up(ino, (flags & O_TRUNC) ? std::optional<uint64_t>(0) : std::nullopt));
  LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
  auto h = std::make_unique<Handle>();
  h->ino = ino;
  h->flags = flags;
  const std::string path = upper_path(rel);
  h->fd = ::open(path.c_str(), upper_open_flags(flags));
  if (h->fd < 0) {
    if (errno != ENOENT || !n->lower || writing) return errno_error("open " + path);
    LC_ASSIGN_OR_RETURN(uint64_t lh, lower_.open(*n->lower, O_RDONLY));
    h->lower_handle = lh;
  }
  if (keep_cache != nullptr) *keep_cache = h->lower_handle.has_value();
  const uint64_t id = next_handle_++;
  n->handles.push_back(id);
  handles_.emplace(id, std::move(h));
  return id;
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
  auto h = open(entry.ino, flags & ~(O_CREAT | O_EXCL));
  if (!h.ok()) {
    forget(entry.ino, 1);
    return h.error();
  }
  LC_ASSIGN_OR_RETURN(entry.st, getattr(entry.ino));
  return std::make_pair(entry, *h);
}

void Overlay::read(uint64_t handle_id, uint64_t offset, size_t size, ReadCallback cb) {
  Handle* h = nullptr;
  {
    std::lock_guard lock(mu_);
    auto r = handle(handle_id);
    if (!r.ok()) return cb(r.error());
    h = *r;
  }
  std::unique_lock hl(h->mu);
  if (h->fd >= 0) {
    auto buf = std::make_shared<std::string>(size, '\0');
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
  Handle* h = nullptr;
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
  Handle* h = nullptr;
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
  std::unique_ptr<Handle> h;
  {
    std::lock_guard lock(mu_);
    auto it = handles_.find(handle_id);
    if (it == handles_.end()) return;
    h = std::move(it->second);
    handles_.erase(it);
    if (auto n = nodes_.find(h->ino); n != nodes_.end()) {
      auto& hs = n->second.handles;
      hs.erase(std::remove(hs.begin(), hs.end(), handle_id), hs.end());
      if (hs.empty() && n->second.nlookup == 0 && h->ino != kRootIno) {
        for (const auto& link : n->second.links) {
          if (auto nm = names_.find(link); nm != names_.end() && nm->second == h->ino) names_.erase(nm);
        }
        nodes_.erase(n);
      }
    }
  }
  if (h->fd >= 0) ::close(h->fd);
  if (h->lower_handle) lower_.release(*h->lower_handle);
}

Result<std::vector<DirEntryInfo>> Overlay::list_at(const std::string& rel, bool has_upper, std::optional<EntryId> lower) {
  std::vector<DirEntryInfo> out;
  std::set<std::string> seen;
  bool is_opaque = false;
  if (has_upper) {
    const std::string dir = upper_path(rel);
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return errno_error("opendir " + dir);
    std::vector<std::string> names;
    while (dirent* de = ::readdir(d)) {
      std::string name = de->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    ::closedir(d);
    for (std::string& name : names) {
      if (reserved(name)) {
        if (name == kOpaqueMarker) is_opaque = true;
        else seen.insert(name.substr(kWhiteoutPrefix.size()));
        continue;
      }
      Resolved r;
      if (::lstat((dir + "/" + name).c_str(), &r.st) != 0) continue;  // gone meanwhile
      r.exists = r.upper = true;
      if (lower) {
        if (auto id = lower_.index().lookup(*lower, name)) {
          const EntryId c = lower_.canonical(*id);
          if ((r.st.st_mode & S_IFMT) == type_of(lower_.index().entry(c).type)) r.lower_behind = c;
        }
      }
      seen.insert(name);
      out.push_back(DirEntryInfo{name, ino_for(r), static_cast<uint32_t>(r.st.st_mode & S_IFMT)});
    }
  }
  if (lower && !is_opaque) {
    auto kids = lower_.index().children(*lower);
    for (uint32_t i = 0; i < kids.count; ++i) {
      const format::Entry e = lower_.index().entry(kids.first + i);
      std::string name(e.name);
      if (seen.count(name)) continue;
      out.push_back(DirEntryInfo{std::move(name), lower_ino(e.id), type_of(e.type)});
    }
  }
  std::sort(out.begin(), out.end(), [](const DirEntryInfo& a, const DirEntryInfo& b) { return a.name < b.name; });
  return out;
}

Result<std::vector<DirEntryInfo>> Overlay::list(uint64_t ino) {
  std::lock_guard lock(mu_);
  LC_ASSIGN_OR_RETURN(Node * n, node(ino));
  LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
  struct stat st;
  const bool has_upper = ::lstat(upper_path(rel).c_str(), &st) == 0;
  if (has_upper && !S_ISDIR(st.st_mode)) return sys_error(ENOTDIR, rel);
  std::optional<EntryId> lower = n->lower;
  if (lower && lower_.index().entry(*lower).type != format::EntryType::kDirectory) {
    if (!has_upper) return sys_error(ENOTDIR, rel);
    lower.reset();
  }
  if (!has_upper && !lower) return sys_error(ENOENT, rel);
  return list_at(rel, has_upper, lower);
}

Result<struct stat> Overlay::setattr(uint64_t ino, const SetAttr& attr, std::optional<uint64_t> handle_id) {
  std::lock_guard lock(mu_);
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
}

Result<std::optional<std::string>> Overlay::getxattr(uint64_t ino, std::string_view name) {
  std::lock_guard lock(mu_);
  LC_ASSIGN_OR_RETURN(Node * n, node(ino));
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
  if (errno != ENOENT || !n->lower) return errno_error("getxattr " + rel);
  return lower_.getxattr(*n->lower, name);
}

Result<std::vector<std::string>> Overlay::listxattr(uint64_t ino) {
  std::lock_guard lock(mu_);
  LC_ASSIGN_OR_RETURN(Node * n, node(ino));
  LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
  const std::string path = upper_path(rel);
  ssize_t len = ::llistxattr(path.c_str(), nullptr, 0);
  if (len < 0) {
    if (errno == ENOTSUP) return std::vector<std::string>();
    if (errno != ENOENT || !n->lower) return errno_error("listxattr " + rel);
    return lower_.listxattr(*n->lower);
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
  std::lock_guard lock(mu_);
  LC_RETURN_IF_ERROR(copy_up(ino));
  LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
  if (::lsetxattr(upper_path(rel).c_str(), std::string(name).c_str(), value.data(), value.size(), flags) != 0) {
    return errno_error("setxattr " + rel);
  }
  return Status();
}

Status Overlay::removexattr(uint64_t ino, std::string_view name) {
  std::lock_guard lock(mu_);
  LC_RETURN_IF_ERROR(copy_up(ino));
  LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
  if (::lremovexattr(upper_path(rel).c_str(), std::string(name).c_str()) != 0) return errno_error("removexattr " + rel);
  return Status();
}

Result<struct statvfs> Overlay::statfs() {
  struct statvfs st;
  if (::statvfs(upper_.c_str(), &st) != 0) return errno_error("statvfs " + upper_);
  st.f_files += lower_.index().entry_count();
  st.f_flag &= ~static_cast<unsigned long>(ST_RDONLY);
  return st;
}

}  // namespace lazycache::fs
