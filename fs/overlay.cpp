// SPDX-License-Identifier: MIT
// File: fs/overlay.cpp -- the overlay's core: state directory, inode numbers and paths, name resolution
// through whiteouts and opaque directories, lookup/getattr/readlink, merged listings, statfs.
// Copy-up: overlay_copy_up.cpp; names: overlay_names.cpp; open files: overlay_files.cpp;
// xattrs: overlay_xattrs.cpp.
#include "fs/overlay.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <set>

#include "common/posix_files.h"
#include "fs/attr_stat.h"
#include "fs/overlay_internal.h"

namespace lazycache::fs {
using namespace overlay_detail;

Overlay::Overlay(Filesystem& lower, EntryId root, OverlayConfig config)
    : lower_(lower), root_(root), inodes_(root, lower.index().entry_count()), config_(std::move(config)) {
  upper_ = config_.state_dir + "/upper";
  work_ = config_.state_dir + "/work";
  next_ino_ = inodes_.first_free();
  archive_lookups_.assign(lower.index().entry_count(), 0);
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
  o->may_have_whiteouts_ = !list_dir(o->upper_).empty();
  struct stat st;
  if (::lstat(o->upper_.c_str(), &st) == 0) o->upper_ino_[static_cast<uint64_t>(st.st_ino)] = kRootIno;
  return o;
}

Overlay::~Overlay() = default;  // in this file, where Handle is complete

bool Overlay::changed() const {
  std::lock_guard lock(mu_);
  return !list_dir(upper_).empty();
}

uint64_t Overlay::copy_ups() const {
  std::lock_guard lock(mu_);
  return copy_ups_;
}

size_t Overlay::nodes_kept() const {
  std::lock_guard lock(mu_);
  return nodes_.size();
}

uint64_t Overlay::lower_ino(EntryId id) const { return inodes_.inode(lower_.canonical(id)); }

std::optional<Overlay::Place> Overlay::archive_place(uint64_t ino) const {
  if (ino == kRootIno || ino >= inodes_.first_free() || ino < 2) return std::nullopt;
  const EntryId id = inodes_.entry(ino);
  if (id == root_) return std::nullopt;  // root_ + 2 is no number the kernel gets: the root is 1
  const format::Entry e = lower_.index().entry(id);
  if (e.type == format::EntryType::kRegular && (e.nlink > 1 || e.link_group != id)) return std::nullopt;
  // The archive's top is its own parent: an entry outside root_'s subtree gets parent 0, which
  // path_of() reports as outside the mount.
  return Place{e.parent == e.id ? 0 : inodes_.inode(e.parent), e.name};
}

Result<Overlay::NodeView> Overlay::node(uint64_t ino) {
  if (auto it = nodes_.find(ino); it != nodes_.end()) {
    Node& n = it->second;
    return NodeView{&n, n.lower, n.links.empty() ? 0 : n.links.front().first};
  }
  // An implicit inode the kernel does not know (count 0) is unknown, as a forgotten Node was: its
  // archive place may not hold it any more (a rename or unlink while nobody knew it).
  const auto place = archive_place(ino);
  if (!place || archive_lookups_[inodes_.entry(ino)] == 0) return Status(ErrorCode::kNotFound, "unknown inode " + std::to_string(ino));
  return NodeView{nullptr, inodes_.entry(ino), place->parent};
}

Overlay::Node& Overlay::materialize(uint64_t ino) {
  if (auto it = nodes_.find(ino); it != nodes_.end()) return it->second;
  Node& n = nodes_[ino];
  if (const auto place = archive_place(ino)) {
    uint32_t& count = archive_lookups_[inodes_.entry(ino)];
    if (count > 0) {
      n.links.emplace_back(place->parent, std::string(place->name));
      names_[n.links.back()] = ino;
      n.nlookup = count;
      n.lower = inodes_.entry(ino);
      count = 0;
    }
  }
  return n;
}

std::optional<uint64_t> Overlay::known_implicit_at(uint64_t parent, std::string_view name) const {
  EntryId dir = 0;
  if (parent == kRootIno) dir = root_;
  else if (archive_place(parent)) dir = inodes_.entry(parent);
  else return std::nullopt;
  if (lower_.index().entry(dir).type != format::EntryType::kDirectory) return std::nullopt;
  auto id = lower_.index().lookup(dir, name);
  if (!id) return std::nullopt;
  const uint64_t ino = inodes_.inode(*id);
  if (!archive_place(ino) || nodes_.count(ino) != 0 || archive_lookups_[*id] == 0) return std::nullopt;
  return ino;
}

void Overlay::settle(std::unordered_map<uint64_t, Node>::iterator it) {
  const uint64_t ino = it->first;
  Node& n = it->second;
  if (ino == kRootIno || !n.handles.empty()) return;
  if (n.nlookup > 0) {
    // Implicit again only when the archive tells everything the Node says.
    const auto place = archive_place(ino);
    if (!place || n.links.size() != 1 || n.lower != std::optional<EntryId>(inodes_.entry(ino))) return;
    if (n.links.front().first != place->parent || n.links.front().second != place->name) return;
    archive_lookups_[inodes_.entry(ino)] = static_cast<uint32_t>(std::min<uint64_t>(n.nlookup, UINT32_MAX));
  }
  for (const auto& link : n.links) {
    if (auto nm = names_.find(link); nm != names_.end() && nm->second == ino) names_.erase(nm);
  }
  nodes_.erase(it);
}

Result<std::string> Overlay::path_of(uint64_t ino) {
  std::vector<std::string_view> parts;
  for (int depth = 0; ino != kRootIno; ++depth) {
    if (depth > 4096) return Status(ErrorCode::kNotFound, "inode " + std::to_string(ino) + " is nested too deep");
    if (auto it = nodes_.find(ino); it != nodes_.end()) {
      if (it->second.links.empty()) return Status(ErrorCode::kNotFound, "inode " + std::to_string(ino) + " has no name any more");
      parts.push_back(it->second.links.front().second);
      ino = it->second.links.front().first;
    } else {
      const auto place = archive_place(ino);
      if (!place) return Status(ErrorCode::kNotFound, "inode " + std::to_string(ino) + " has no name any more");
      if (place->parent == 0) return Status(ErrorCode::kNotFound, "inode " + std::to_string(ino) + " is outside the mount");
      parts.push_back(place->name);
      ino = place->parent;
    }
  }
  std::string out;
  for (auto p = parts.rbegin(); p != parts.rend(); ++p) {
    if (!out.empty()) out += '/';
    out += *p;
  }
  return out;
}

bool Overlay::opaque(const std::string& rel) const {
  struct stat st;
  return ::lstat((upper_path(rel) + "/" + overlay_marker_name("")).c_str(), &st) == 0;
}

bool Overlay::no_upper_dir(uint64_t dir_ino, const std::string& rel) {
  if (no_upper_dir_.count(dir_ino) != 0) return true;
  struct stat st;
  if (::lstat(upper_path(rel).c_str(), &st) == 0 || (errno != ENOENT && errno != ENOTDIR)) return false;
  no_upper_dir_.insert(dir_ino);
  return true;
}

bool Overlay::whiteout(const std::string& rel_dir, std::string_view name) const {
  struct stat st;
  return ::lstat((upper_path(rel_dir) + "/" + overlay_marker_name(name)).c_str(), &st) == 0;
}

Result<Overlay::Resolved> Overlay::resolve(uint64_t parent, std::string_view name) {
  LC_ASSIGN_OR_RETURN(NodeView pn, node(parent));
  LC_ASSIGN_OR_RETURN(std::string dir, path_of(parent));
  Resolved r;
  if (reserved(name) || name.empty() || name == "." || name == "..") return r;
  const std::string rel = join(dir, name);
  // Most directories of a mounted cache are never written: when the parent has no upper
  // directory there can be no upper entry, whiteout or opaque marker in it, and one lstat
  // answers what would take three (a find over 30,000 entries pays this on every lookup).
  if (pn.lower && no_upper_dir(parent, dir)) {
    if (auto id = lower_.index().lookup(*pn.lower, name)) {
      r.exists = true;
      r.lower = lower_.canonical(*id);
    }
    return r;
  }
  // The archive entry at this path, if the parent still merges with the archive.
  std::optional<EntryId> below;
  if (pn.lower && !opaque(dir)) {
    if (auto id = lower_.index().lookup(*pn.lower, name)) below = lower_.canonical(*id);
  }
  if (::lstat(upper_path(rel).c_str(), &r.st) == 0) {
    r.exists = r.upper = true;
    if (below && S_ISDIR(r.st.st_mode) && lower_.index().entry(*below).type == format::EntryType::kDirectory && !opaque(rel)) {
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
  // An upper entry numbered as the archive entry behind it (left by an earlier job in a kept
  // upper directory, or made over a whiteout) has its own bytes: never hand it archive ones.
  if (!S_ISDIR(r.st.st_mode)) page_cache_gate_.mark(ino);
  return ino;
}

bool Overlay::offer_to_page_cache(EntryId file, const std::function<bool(uint64_t ino)>& store) {
  const uint64_t ino = lower_ino(file);
  if (!page_cache_gate_.begin(ino)) return false;
  const bool took = store(ino);
  page_cache_gate_.end(ino);
  return took;
}

void Overlay::forget_upper_inode(const struct stat& st) {
  if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) return;  // other names still use the number
  upper_ino_.erase(static_cast<uint64_t>(st.st_ino));
}

Result<struct stat> Overlay::lower_stat(EntryId id, uint64_t ino) const {
  LC_ASSIGN_OR_RETURN(Attr a, lower_.getattr(id));
  struct stat st = to_stat(a, ino);
  if (a.nlink > 1 && may_have_whiteouts_) {
    // A name of the group unlinked (whited out) leaves the others with one link fewer, as on
    // disk. Hardlinked files are rare: the scan of the index is paid for them only.
    const auto paths = group_paths(lower_.canonical(id));
    st.st_nlink = static_cast<nlink_t>(
        std::count_if(paths.begin(), paths.end(), [&](const std::string& p) { return archive_path_visible(p); }));
  }
  return st;
}

Result<struct stat> Overlay::stat_of(uint64_t ino) {
  LC_ASSIGN_OR_RETURN(NodeView n, node(ino));
  struct stat st;
  auto rel = path_of(ino);
  if (rel.ok()) {
    // An archive file in a directory without an upper one: no lstat of upper/ needed.
    const bool upper_absent = n.lower && n.parent != 0 && no_upper_dir_.count(n.parent) != 0;
    if (!upper_absent && ::lstat(upper_path(*rel).c_str(), &st) == 0) {
      st.st_ino = ino;
      if (S_ISDIR(st.st_mode) && n.lower && !opaque(*rel)) {
        // 2 + subdirectories of the merged view, as on disk: find's leaf optimisation trusts it.
        LC_ASSIGN_OR_RETURN(auto kids, list_at(*rel, true, n.lower));
        st.st_nlink = 2 + static_cast<nlink_t>(
                              std::count_if(kids.begin(), kids.end(), [](const DirEntryInfo& k) { return k.type == S_IFDIR; }));
      }
      return st;
    }
    if (n.lower) return lower_stat(*n.lower, ino);
  }
  if (n.node == nullptr) return Status(ErrorCode::kNotFound, "inode " + std::to_string(ino) + " is gone");
  for (uint64_t h : n.node->handles) {  // unlinked but open: the descriptor still knows it
    Handle& hd = *handles_.at(h);       // mu_ held: release() cannot drop it meanwhile
    std::lock_guard lock(hd.mu);
    if (hd.fd >= 0 && ::fstat(hd.fd, &st) == 0) {
      st.st_ino = ino;
      return st;
    }
    if (n.lower) return lower_stat(*n.lower, ino);
  }
  return Status(ErrorCode::kNotFound, "inode " + std::to_string(ino) + " is gone");
}

OverlayEntry Overlay::remember(uint64_t ino, uint64_t parent, std::string_view name, std::optional<EntryId> lower, const struct stat& st) {
  const auto key = std::make_pair(parent, std::string(name));
  if (auto it = names_.find(key); it != names_.end() && it->second != ino) drop_link(parent, name);
  OverlayEntry e;
  e.ino = ino;
  e.st = st;
  e.st.st_ino = ino;
  if (lower == std::optional<EntryId>(inodes_.entry(ino)) && nodes_.count(ino) == 0) {
    const auto place = archive_place(ino);
    if (place && place->parent == parent && place->name == name) {  // the archive's own place: implicit
      uint32_t& count = archive_lookups_[inodes_.entry(ino)];
      if (count < UINT32_MAX) ++count;
      return e;
    }
  }
  if (auto other = known_implicit_at(parent, name); other && *other != ino) drop_link(parent, name);
  Node& n = materialize(ino);
  if (std::find(n.links.begin(), n.links.end(), key) == n.links.end()) n.links.push_back(key);
  names_[key] = ino;
  n.nlookup += 1;
  if (lower) n.lower = lower;
  return e;
}

void Overlay::drop_link(uint64_t parent, std::string_view name) {
  const auto key = std::make_pair(parent, std::string(name));
  // An implicit inode the kernel knows there leaves its archive place: a Node records that.
  if (auto known = known_implicit_at(parent, name)) materialize(*known);
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
  if (it == nodes_.end()) {
    if (!archive_place(ino)) return;
    uint32_t& count = archive_lookups_[inodes_.entry(ino)];
    count = nlookup >= count ? 0 : count - static_cast<uint32_t>(nlookup);
    return;
  }
  Node& n = it->second;
  n.nlookup = nlookup >= n.nlookup ? 0 : n.nlookup - nlookup;
  settle(it);
}

Result<struct stat> Overlay::getattr(uint64_t ino) {
  std::lock_guard lock(mu_);
  return stat_of(ino);
}

Result<std::string> Overlay::readlink(uint64_t ino) {
  std::lock_guard lock(mu_);
  LC_ASSIGN_OR_RETURN(NodeView n, node(ino));
  LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
  char buf[PATH_MAX + 1];
  ssize_t len = ::readlink(upper_path(rel).c_str(), buf, PATH_MAX);
  if (len >= 0) return std::string(buf, static_cast<size_t>(len));
  if (errno != ENOENT || !n.lower) return errno_error("readlink " + rel);
  return lower_.readlink(*n.lower);
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
  LC_ASSIGN_OR_RETURN(NodeView n, node(ino));
  LC_ASSIGN_OR_RETURN(std::string rel, path_of(ino));
  struct stat st;
  const bool has_upper = ::lstat(upper_path(rel).c_str(), &st) == 0;
  const int upper_errno = has_upper ? 0 : errno;
  if (has_upper && !S_ISDIR(st.st_mode)) return sys_error(ENOTDIR, rel);
  std::optional<EntryId> lower = n.lower;
  if (lower && lower_.index().entry(*lower).type != format::EntryType::kDirectory) {
    if (!has_upper) return sys_error(ENOTDIR, rel);
    lower.reset();
  }
  if (!has_upper && !lower) return sys_error(ENOENT, rel);
  // An archive directory listed without an upper one: remembered as a lookup does
  // (no_upper_dir), so the files listed here (the tree walk at mount lists every directory) are
  // stat'ed and opened without trying upper/ first.
  if (!has_upper && (upper_errno == ENOENT || upper_errno == ENOTDIR)) no_upper_dir_.insert(ino);
  return list_at(rel, has_upper, lower);
}

Result<struct statvfs> Overlay::statfs() {
  struct statvfs st;
  if (::statvfs(upper_.c_str(), &st) != 0) return errno_error("statvfs " + upper_);
  st.f_files += lower_.index().entry_count();
  st.f_flag &= ~static_cast<unsigned long>(ST_RDONLY);
  return st;
}

}  // namespace lazycache::fs
