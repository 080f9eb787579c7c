// SPDX-License-Identifier: MIT
// merged_overlay_tree(): the overlay's name resolution (fs/overlay.cpp: resolve, list_at,
// lower_stat) replayed over a whole tree at once, depth first in name order as scan_tree walks.
#include "fs/overlay_tree.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>

#include "format/fs_util.h"
#include "fs/overlay_layout.h"

namespace lazycache::fs {

namespace {

using format::EntryId;
using format::EntryType;
using format::IndexNode;
using format::ScannedTree;

// Archive hardlink groups get inode keys no real file system hands out: one device per mount, as
// each mount is its own file system under the scan (groups never span two mounts).
constexpr uint64_t kArchiveDevTop = UINT64_MAX;

// One name of a merged directory: its upper entry (lstat-ed), or the archive entry visible there.
struct Child {
  std::string name;
  bool upper = false;
  struct stat st {};
  // upper: the archive directory it merges with, if it is a directory over one; else the entry.
  std::optional<EntryId> lower;
  bool redirected = false;  // an upper directory a kernel overlayfs moved here (its `lower` says from where)
};

// A directory being listed.
struct Level {
  uint32_t node;
  std::string upper_path;  // its path in upper/ (when it has an upper directory)
  std::vector<Child> kids;
  size_t next = 0;
};

class Builder {
 public:
  Builder(const format::Index& base, const OverlayTreeOptions& options, ScannedTree& tree) : base_(base), options_(options), t_(tree) {}

  uint32_t add_node(IndexNode n, uint32_t parent, int32_t root) {
    const auto id = static_cast<uint32_t>(t_.model.nodes.size());
    n.parent = parent;
    n.link_group = id;
    t_.model.nodes.push_back(std::move(n));
    t_.node_root.push_back(root);
    t_.dev_ino.emplace_back(0, 0);
    t_.stat_nlink.push_back(1);
    t_.read_at.emplace_back();
    if (id != parent) t_.model.nodes[parent].children.push_back(id);
    return id;
  }

  // The tree of one mount, below directory node `parent`.
  Status add_root(const OverlayTreeRoot& r, const std::string& name, uint32_t parent, int32_t root) {
    root_ = root;
    lower_root_ = r.lower_root;
    Child top{name, true, {}, r.lower_root};
    if (::lstat(r.upper_dir.c_str(), &top.st) != 0) return errno_status("lstat " + r.upper_dir);
    if (!S_ISDIR(top.st.st_mode)) return Status(ErrorCode::kInvalidArgument, r.upper_dir + " is not a directory");
    LC_ASSIGN_OR_RETURN(uint32_t dir, add_one(top, r.upper_dir, parent));
    std::vector<Level> stack;
    LC_ASSIGN_OR_RETURN(auto kids, list(r.upper_dir, true, r.lower_root));
    stack.push_back(Level{dir, r.upper_dir, std::move(kids)});
    while (!stack.empty()) {
      Level& level = stack.back();
      if (level.next == level.kids.size()) {
        stack.pop_back();
        continue;
      }
      const Child c = level.kids[level.next++];
      const uint32_t node = level.node;
      const std::string upper_path = level.upper_path + "/" + c.name;
      if (format::extract_temporary_pid(c.name) != 0) {  // as scan_tree: never saved
        warn("skipping " + upper_path + ": a temporary of an interrupted extract");
        continue;
      }
      LC_ASSIGN_OR_RETURN(uint32_t sub, add_one(c, upper_path, node));
      if (sub == kNoDir) continue;
      LC_ASSIGN_OR_RETURN(auto sub_kids, list(upper_path, c.upper, c.lower));
      stack.push_back(Level{sub, upper_path, std::move(sub_kids)});
    }
    return Status();
  }

  // Link counts of archive files: the names of their group still visible in the mount
  // (Overlay::lower_stat), found once every node is in.
  void count_archive_links() {
    std::map<std::pair<uint64_t, uint64_t>, uint64_t> names;
    for (uint32_t n : archive_files_) ++names[t_.dev_ino[n]];
    for (uint32_t n : archive_files_)
      if (t_.stat_nlink[n] > 1) t_.stat_nlink[n] = names[t_.dev_ino[n]];
  }

 private:
  static constexpr uint32_t kNoDir = UINT32_MAX;

  void warn(const std::string& m) {
    ++t_.skipped;
    if (options_.warn) options_.warn(m);
  }

  // The directory at `upper_path` (if `has_upper`) merged with archive directory `lower`, sorted.
// GCC 12 at -O2 reports the payload of an empty std::optional<EntryId> (Child::lower) copied in
// list() as maybe-uninitialized: a known false positive for optionals of trivial types.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
  Result<std::vector<Child>> list(const std::string& upper_path, bool has_upper, std::optional<EntryId> lower) {
    std::vector<Child> out;
    std::set<std::string> hidden;  // upper names and whiteouts: the archive's entry does not show
    bool opaque = false;
    if (lower && base_.entry(*lower).type != EntryType::kDirectory) lower.reset();
    if (has_upper) {
      DIR* d = ::opendir(upper_path.c_str());
      if (!d) return errno_status("reading directory " + upper_path);
      std::vector<std::string> names;
      errno = 0;
      while (dirent* de = ::readdir(d)) {
        std::string n = de->d_name;
        if (n != "." && n != "..") names.push_back(std::move(n));
        errno = 0;
      }
      const int err = errno;
      ::closedir(d);
      if (err) return errno_status("reading directory " + upper_path, err);
      // A kernel overlayfs marks an opaque directory on the directory itself.
      char flag = 0;
      if (::lgetxattr(upper_path.c_str(), kKernelOpaqueXattr, &flag, 1) == 1 && flag == 'y') opaque = true;
      for (std::string& name : names) {
        if (overlay_reserved_name(name)) {
          if (name == kOpaqueMarker) opaque = true;
          else hidden.insert(name.substr(kWhiteoutPrefix.size()));
          continue;
        }
        Child c;
        c.upper = true;
        if (::lstat((upper_path + "/" + name).c_str(), &c.st) != 0) {
          if (errno == ENOENT) continue;  // gone meanwhile
          return errno_status("lstat " + upper_path + "/" + name);
        }
        hidden.insert(name);
        if (kernel_overlay_whiteout(c.st)) continue;  // a kernel overlayfs whiteout: only hides
        c.name = std::move(name);
        if (S_ISDIR(c.st.st_mode)) {
          LC_ASSIGN_OR_RETURN(c.redirected, redirect_of(upper_path + "/" + c.name, lower, c.lower));
        }
        out.push_back(std::move(c));
      }
    }
    if (lower && !opaque) {
      // An upper directory over an archive directory merges with it (unless it is opaque itself,
      // which its own listing finds).
      const EntryId lower_dir = *lower;
      for (Child& c : out) {
        if (!S_ISDIR(c.st.st_mode) || c.redirected) continue;
        if (auto id = base_.lookup(lower_dir, c.name); id && base_.entry(*id).type == EntryType::kDirectory) c.lower = *id;
      }
      const auto kids = base_.children(lower_dir);
      for (uint32_t i = 0; i < kids.count; ++i) {
        const format::Entry e = base_.entry(kids.first + i);
        std::string name(e.name);
        if (hidden.count(name)) continue;
        out.push_back(Child{std::move(name), false, {}, e.id});
      }
    }
    std::sort(out.begin(), out.end(), [](const Child& a, const Child& b) { return a.name < b.name; });
    return out;
  }
#pragma GCC diagnostic pop

  // A directory a kernel overlayfs moved here (trusted.overlay.redirect): sets `lower` to the
  // archive directory it came from (an absolute redirect is a path from the mounted directory, a
  // relative one a name in the parent's archive directory `parent_lower`; none when that is gone)
  // and returns true. Not redirected: false, `lower` untouched.
  Result<bool> redirect_of(const std::string& path, std::optional<EntryId> parent_lower, std::optional<EntryId>& lower) const {
    std::string target(4096, '\0');
    const ssize_t n = ::lgetxattr(path.c_str(), kKernelRedirectXattr, target.data(), target.size());
    if (n < 0) {
      if (errno == ENODATA || errno == ENOTSUP) return false;
      return errno_status("reading " + std::string(kKernelRedirectXattr) + " of " + path);
    }
    target.resize(static_cast<size_t>(n));
    while (!target.empty() && target.back() == '\0') target.pop_back();
    std::optional<EntryId> at = target.starts_with('/') ? std::optional<EntryId>(lower_root_) : parent_lower;
    for (const std::string& part : format::split_path(target)) {
      if (!at) break;
      auto id = base_.lookup(*at, part);
      at = id && base_.entry(*id).type == EntryType::kDirectory ? std::optional<EntryId>(*id) : std::nullopt;
    }
    lower = at;
    return true;
  }

  Result<std::vector<format::Xattr>> upper_xattrs(const std::string& path) const {
    if (options_.xattrs == format::XattrSet::kNone) return std::vector<format::Xattr>();
    LC_ASSIGN_OR_RETURN(auto xattrs, format::read_xattrs_at(path, path, options_.xattrs));
    // A kernel overlayfs's own (opaque, origin, impure): its merged view does not show them.
    std::erase_if(xattrs, [](const format::Xattr& x) { return x.name.starts_with(kKernelXattrPrefix); });
    return xattrs;
  }

  // The archive's xattrs of `id` that the scan would keep (format::read_xattrs' filter), by name.
  std::vector<format::Xattr> archive_xattrs(EntryId id) const {
    std::vector<format::Xattr> out;
    if (options_.xattrs == format::XattrSet::kNone || !base_.entry(id).has_xattrs) return out;
    for (auto& x : base_.xattrs(id)) {
      const bool user = x.name.rfind("user.", 0) == 0;
      const bool stored = user || x.name.rfind("trusted.", 0) == 0 || x.name.rfind("security.", 0) == 0;
      if (!stored || (options_.xattrs == format::XattrSet::kUser && !user)) continue;
      out.push_back(std::move(x));
    }
    std::sort(out.begin(), out.end(), [](const format::Xattr& a, const format::Xattr& b) { return a.name < b.name; });
    return out;
  }

  // The node of `c` under `parent`; a directory's node, else kNoDir (also for skipped entries).
  Result<uint32_t> add_one(const Child& c, const std::string& upper_path, uint32_t parent) {
    IndexNode n;
    n.name = c.name;
    if (c.upper) {
      const struct stat& st = c.st;
      n.mode = st.st_mode & 07777;
      n.uid = st.st_uid;
      n.gid = st.st_gid;
      n.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      if (S_ISREG(st.st_mode)) {
        n.type = EntryType::kRegular;
        n.size = static_cast<uint64_t>(st.st_size);
        LC_ASSIGN_OR_RETURN(n.xattrs, upper_xattrs(upper_path));
        const uint32_t id = add_node(std::move(n), parent, root_);
        t_.dev_ino[id] = {st.st_dev, st.st_ino};
        t_.stat_nlink[id] = st.st_nlink;
        // The save reads it here, not through the mount (a FUSE round trip per read).
        t_.read_at[id] = upper_path;
        return kNoDir;
      }
      if (S_ISLNK(st.st_mode)) {
        n.type = EntryType::kSymlink;
        std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
        for (;;) {
          const ssize_t len = ::readlink(upper_path.c_str(), target.data(), target.size());
          if (len < 0) return errno_status("readlink " + upper_path);
          if (static_cast<size_t>(len) < target.size()) {
            target.resize(static_cast<size_t>(len));
            break;
          }
          target.resize(target.size() * 2);
        }
        return add_symlink(std::move(n), std::move(target), upper_path, parent);
      }
      if (S_ISDIR(st.st_mode)) {
        n.type = EntryType::kDirectory;
        LC_ASSIGN_OR_RETURN(n.xattrs, upper_xattrs(upper_path));
        return add_node(std::move(n), parent, root_);
      }
      warn("skipping " + upper_path + ": sockets, devices and fifos are not archived");
      return kNoDir;
    }
    // An archive entry: what Filesystem::getattr reports for it (hardlinks: their group's entry).
    const format::Entry named = base_.entry(*c.lower);
    const EntryId canonical = named.type == EntryType::kRegular ? named.link_group : named.id;
    const format::Entry e = base_.entry(canonical);
    n.type = e.type;
    n.mode = e.type == EntryType::kSymlink ? 0777 : e.mode & 07777;
    n.uid = options_.owner ? options_.owner->first : e.uid;
    n.gid = options_.owner ? options_.owner->second : e.gid;
    n.mtime_ns = e.mtime_ns;
    if (e.type == EntryType::kSymlink) return add_symlink(std::move(n), std::string(e.symlink_target), upper_path, parent);
    n.xattrs = archive_xattrs(canonical);
    if (e.type == EntryType::kDirectory) return add_node(std::move(n), parent, root_);
    n.size = e.size;
    const uint32_t id = add_node(std::move(n), parent, root_);
    t_.dev_ino[id] = {kArchiveDevTop - static_cast<uint64_t>(root_), canonical};
    t_.stat_nlink[id] = std::max<uint32_t>(1, e.nlink);
    archive_files_.push_back(id);
    return kNoDir;
  }

  Result<uint32_t> add_symlink(IndexNode n, std::string target, const std::string& what, uint32_t parent) {
    if (target.empty()) {
      warn("skipping symlink with an empty target: " + what);
      return kNoDir;
    }
    n.size = target.size();
    n.symlink_target = std::move(target);
    add_node(std::move(n), parent, root_);
    return kNoDir;
  }

  const format::Index& base_;
  const OverlayTreeOptions& options_;
  ScannedTree& t_;
  int32_t root_ = -1;
  EntryId lower_root_ = 0;               // the archive directory mounted at the root being added
  std::vector<uint32_t> archive_files_;  // regular-file nodes taken from the archive
};

}  // namespace

Result<ScannedTree> merged_overlay_tree(const format::Index& base, const std::vector<OverlayTreeRoot>& roots,
                                        const OverlayTreeOptions& options) {
  std::vector<format::PackRoot> pack_roots;
  for (const auto& r : roots) pack_roots.push_back(format::PackRoot{r.mount_path, r.member});
  LC_ASSIGN_OR_RETURN(auto normalized, format::normalize_roots(pack_roots, "/"));
  ScannedTree t;
  Builder b(base, options, t);
  IndexNode top;
  top.type = EntryType::kDirectory;
  top.mode = 0755;
  b.add_node(std::move(top), 0, -1);
  for (size_t ri = 0; ri < roots.size(); ++ri) {
    const auto& nr = normalized[ri];
    if (roots[ri].lower_root >= base.entry_count() || base.entry(roots[ri].lower_root).type != EntryType::kDirectory)
      return Status(ErrorCode::kInvalidArgument, "the entry mounted at " + nr.original_path + " is not a directory of the base");
    const auto comps = format::split_path(nr.member_prefix);
    LC_ASSIGN_OR_RETURN(uint32_t parent,
                        format::add_implicit_ancestors(t, nr, [&](IndexNode n, uint32_t p) { return b.add_node(std::move(n), p, -1); }));
    const auto before = static_cast<uint32_t>(t.model.nodes.size());
    LC_RETURN_IF_ERROR(b.add_root(roots[ri], comps.back(), parent, static_cast<int32_t>(ri)));
    t.model.roots.push_back(format::IndexRootSpec{nr.original_path, nr.member_prefix, before});
  }
  b.count_archive_links();
  auto& nodes = t.model.nodes;
  for (auto& n : nodes)  // as scan_for_pack leaves them (implicit ancestors were added unsorted)
    std::sort(n.children.begin(), n.children.end(), [&](uint32_t x, uint32_t y) { return nodes[x].name < nodes[y].name; });
  return t;
}

std::string scanned_tree_difference(const ScannedTree& a, const ScannedTree& b, bool b_may_split_links) {
  const auto& an = a.model.nodes;
  const auto& bn = b.model.nodes;
  auto path = [&](uint32_t id) {
    std::string p;
    for (uint32_t n = id; n != 0 && n < an.size(); n = an[n].parent) p = an[n].name + (p.empty() ? "" : "/" + p);
    return p.empty() ? std::string("(top)") : p;
  };
  if (a.model.roots.size() != b.model.roots.size()) return "the number of roots differs";
  for (size_t i = 0; i < a.model.roots.size(); ++i) {
    const auto &x = a.model.roots[i], &y = b.model.roots[i];
    if (x.original_path != y.original_path || x.member_prefix != y.member_prefix || x.node != y.node)
      return "root " + x.original_path + " differs";
  }
  // Hardlink groups: the same partition of the files that report more than one link.
  std::map<std::pair<uint64_t, uint64_t>, std::pair<uint64_t, uint64_t>> group_map, group_back;
  for (uint32_t i = 0; i < an.size() && i < bn.size(); ++i) {
    const IndexNode &x = an[i], &y = bn[i];
    const std::string at = path(i);
    if (x.name != y.name || x.parent != y.parent || x.children != y.children || x.implicit_dir != y.implicit_dir)
      return at + ": the tree differs here (" + y.name + " in the other)";
    if (x.type != y.type) return at + ": type differs";
    // An implicit ancestor (the path above a root) is no tar member: its metadata is read from
    // the host directory at the time of each scan (a /tmp other programs write to), never saved.
    if (x.implicit_dir) continue;
    if (x.mode != y.mode) return at + ": mode " + std::to_string(x.mode) + " vs " + std::to_string(y.mode);
    if (x.uid != y.uid || x.gid != y.gid) return at + ": owner differs";
    if (x.mtime_ns != y.mtime_ns) return at + ": mtime " + std::to_string(x.mtime_ns) + " vs " + std::to_string(y.mtime_ns);
    if (x.size != y.size) return at + ": size " + std::to_string(x.size) + " vs " + std::to_string(y.size);
    if (x.symlink_target != y.symlink_target) return at + ": symlink target differs";
    if (x.xattrs.size() != y.xattrs.size()) return at + ": xattr count differs";
    for (size_t k = 0; k < x.xattrs.size(); ++k)
      if (x.xattrs[k].name != y.xattrs[k].name || x.xattrs[k].value != y.xattrs[k].value)
        return at + ": xattr " + x.xattrs[k].name + " differs";
    if (a.node_root[i] != b.node_root[i]) return at + ": root differs";
    if (x.type != EntryType::kRegular) continue;
    if ((a.stat_nlink[i] > 1) != (b.stat_nlink[i] > 1)) return at + ": hardlinked in one tree only";
    if (a.stat_nlink[i] <= 1) continue;
    auto [f, fresh] = group_map.emplace(a.dev_ino[i], b.dev_ino[i]);
    auto [g, gfresh] = group_back.emplace(b.dev_ino[i], a.dev_ino[i]);
    if ((f->second != b.dev_ino[i] && !b_may_split_links) || g->second != a.dev_ino[i]) return at + ": hardlink group differs";
  }
  if (an.size() != bn.size()) return std::to_string(an.size()) + " nodes vs " + std::to_string(bn.size());
  return "";
}

}  // namespace lazycache::fs
