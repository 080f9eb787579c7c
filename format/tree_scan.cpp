// SPDX-License-Identifier: MIT
#include "format/tree_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "format/dir_stack.h"
#include "format/fs_util.h"

namespace lazycache::format {

namespace {

std::string join(const std::vector<std::string>& comps, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < comps.size(); ++i) {
    if (i) out += '/';
    out += comps[i];
  }
  return out;
}

// Walks depth first. Directories are held by a DirStack, not one descriptor per level of the
// recursion: a tree 2,000 levels deep would otherwise hold 2,000 descriptors (and more than the
// open-files limit further down), and each directory is still opened once, relative to its parent.
class Scanner {
 public:
  Scanner(ScannedTree& t, XattrSet xattrs, const std::function<void(const std::string&)>& warn) : t_(t), xattrs_(xattrs), warn_(warn) {}

  uint32_t add_node(IndexNode n, uint32_t parent, int32_t root) {
    auto id = static_cast<uint32_t>(t_.model.nodes.size());
    n.parent = parent;
    n.link_group = id;
    t_.model.nodes.push_back(std::move(n));
    t_.node_root.push_back(root);
    t_.dev_ino.emplace_back(0, 0);
    t_.stat_nlink.push_back(1);
    if (id != parent) t_.model.nodes[parent].children.push_back(id);
    return id;
  }

  static void fill_from_stat(IndexNode& n, const struct stat& st) {
    n.mode = st.st_mode & 07777;
    n.uid = st.st_uid;
    n.gid = st.st_gid;
    n.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  }

  // Starts a root's walk: `base_fd` is the directory holding it on disk, model node `parent`.
  void start(int base_fd, uint32_t parent) {
    dirs_.reset(
        DirStack::Tree{[this](EntryId n) { return t_.model.nodes[n].parent; }, [this](EntryId n) { return t_.model.nodes[n].name; }, 0},
        base_fd, parent);
  }

  // Adds the entry `name` (already lstat-ed) under directory node `parent`; scans a directory's
  // contents too.
  Status add_entry(const std::string& name, const struct stat& st, uint32_t parent, int32_t root, const std::string& path) {
    LC_ASSIGN_OR_RETURN(uint32_t dir, add_one(name, st, parent, root, path));
    return dir == kNoDir ? Status() : scan_below(dir, root, path);
  }

 private:
  static constexpr uint32_t kNoDir = UINT32_MAX;

  // One directory being listed by scan_below.
  struct Level {
    uint32_t node;
    std::string path;
    std::vector<std::string> names;  // sorted
    size_t next = 0;
  };

  // add_entry without the scan of a directory: returns the new directory's node, else kNoDir.
  Result<uint32_t> add_one(const std::string& name, const struct stat& st, uint32_t parent, int32_t root, const std::string& path) {
    IndexNode n;
    n.name = name;
    fill_from_stat(n, st);
    if (S_ISREG(st.st_mode)) {
      n.type = EntryType::kRegular;
      n.size = static_cast<uint64_t>(st.st_size);
      if (xattrs_ != XattrSet::kNone) LC_RETURN_IF_ERROR(file_xattrs(parent, name, path, n));
      uint32_t id = add_node(std::move(n), parent, root);
      t_.dev_ino[id] = {st.st_dev, st.st_ino};
      t_.stat_nlink[id] = st.st_nlink;
      return kNoDir;
    }
    if (S_ISLNK(st.st_mode)) {
      n.type = EntryType::kSymlink;
      LC_ASSIGN_OR_RETURN(int dirfd, dirs_.open(parent, [&] { return path; }));
      std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
      for (;;) {
        ssize_t len = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
        if (len < 0) return errno_status("readlink " + path);
        if (static_cast<size_t>(len) < target.size()) {
          target.resize(static_cast<size_t>(len));
          break;
        }
        target.resize(target.size() * 2);
      }
      if (target.empty()) {
        warn_("skipping symlink with an empty target: " + path);
        ++t_.skipped;
        return kNoDir;
      }
      n.size = target.size();
      n.symlink_target = std::move(target);
      add_node(std::move(n), parent, root);
      return kNoDir;
    }
    if (S_ISDIR(st.st_mode)) {
      n.type = EntryType::kDirectory;
      uint32_t id = add_node(std::move(n), parent, root);
      if (xattrs_ != XattrSet::kNone) {
        LC_ASSIGN_OR_RETURN(int fd, dirs_.open(id, [&] { return path; }));
        LC_ASSIGN_OR_RETURN(auto xattrs, read_xattrs(fd, path, xattrs_));
        t_.model.nodes[id].xattrs = std::move(xattrs);
      }
      return id;
    }
    warn_("skipping " + path + ": sockets, devices and fifos are not archived");
    ++t_.skipped;
    return kNoDir;
  }

  // Lists directory `node`, sorted by name.
  Result<std::vector<std::string>> list(uint32_t node, const std::string& path) {
    std::vector<std::string> names;
    LC_ASSIGN_OR_RETURN(int dirfd, dirs_.open(node, [&] { return path; }));
    int fd = ::dup(dirfd);
    if (fd < 0) return errno_status("dup");
    DIR* d = ::fdopendir(fd);
    if (!d) {
      ::close(fd);
      return errno_status("reading directory " + path);
    }
    errno = 0;
    while (struct dirent* de = ::readdir(d)) {
      std::string n = de->d_name;
      if (n != "." && n != "..") names.push_back(std::move(n));
      errno = 0;
    }
    int err = errno;
    ::closedir(d);
    if (err) return errno_status("reading directory " + path, err);
    std::sort(names.begin(), names.end());
    return names;
  }

  // Depth first below directory `top`, in name order (nodes are numbered in that preorder). An
  // explicit stack, not recursion: a tree thousands of levels deep would overflow the thread's
  // stack (it did at 2,000 levels under ASan).
  Status scan_below(uint32_t top, int32_t root, const std::string& top_path) {
    std::vector<Level> stack;
    LC_ASSIGN_OR_RETURN(auto top_names, list(top, top_path));
    stack.push_back(Level{top, top_path, std::move(top_names)});
    while (!stack.empty()) {
      Level& level = stack.back();
      if (level.next == level.names.size()) {
        stack.pop_back();
        continue;
      }
      const std::string name = level.names[level.next++];
      const uint32_t node = level.node;
      std::string child = level.path + "/" + name;
      if (extract_temporary_pid(name) != 0) {  // a partial file of an interrupted extract (fs_util.h)
        warn_("skipping " + child + ": a temporary of an interrupted extract");
        ++t_.skipped;
        continue;
      }
      // Again for every child: scanning the previous one moved the stack below this directory.
      LC_ASSIGN_OR_RETURN(int dirfd, dirs_.open(node, [&] { return stack.back().path; }));
      struct stat st;
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) {  // removed while we scanned: not an error for a live cache dir
          warn_("skipping " + child + ": removed during the scan");
          continue;
        }
        return errno_status("lstat " + child);
      }
      LC_ASSIGN_OR_RETURN(uint32_t dir, add_one(name, st, node, root, child));
      if (dir == kNoDir) continue;
      LC_ASSIGN_OR_RETURN(auto names, list(dir, child));
      stack.push_back(Level{dir, std::move(child), std::move(names)});
    }
    return Status();
  }

  // A regular file's xattrs, read by name below its directory's descriptor, without opening the
  // file: an open of every file would cost a round trip each on a FUSE mount (the merged view
  // `unmount --save` scans) and count as the job's opens there. Without /proc: by an open.
  Status file_xattrs(uint32_t parent, const std::string& name, const std::string& path, IndexNode& n) {
    LC_ASSIGN_OR_RETURN(int dirfd, dirs_.open(parent, [&] { return path; }));
    auto by_name = read_xattrs_at("/proc/self/fd/" + std::to_string(dirfd) + "/" + name, path, xattrs_);
    if (by_name.ok()) {
      n.xattrs = std::move(by_name).value();
      return Status();
    }
    if (by_name.error().sys_errno() != ENOENT) return by_name.error();
    return xattrs_of(parent, name, O_RDONLY | O_NONBLOCK, path, n);
  }

  Status xattrs_of(uint32_t parent, const std::string& name, int flags, const std::string& path, IndexNode& n) {
    LC_ASSIGN_OR_RETURN(int dirfd, dirs_.open(parent, [&] { return path; }));
    int fd = ::openat(dirfd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno_status("opening " + path);
    Fd f(fd);
    LC_ASSIGN_OR_RETURN(n.xattrs, read_xattrs(f.get(), path, xattrs_));
    return Status();
  }

  ScannedTree& t_;
  XattrSet xattrs_;
  const std::function<void(const std::string&)>& warn_;
  DirStack dirs_;
};

}  // namespace

Result<std::vector<NormalizedRoot>> normalize_roots(const std::vector<PackRoot>& roots, const std::string& cwd) {
  if (roots.empty()) return Status(ErrorCode::kInvalidArgument, "no paths to pack");
  std::vector<NormalizedRoot> out;
  for (const auto& r : roots) {
    if (r.path.empty()) return Status(ErrorCode::kInvalidArgument, "empty path");
    auto comps = split_path(r.path);
    for (const auto& c : comps)
      if (c == "..") return Status(ErrorCode::kInvalidArgument, "path '" + r.path + "' contains '..'; give it without '..'");
    if (comps.empty())
      return Status(ErrorCode::kInvalidArgument, "path '" + r.path + "' names no member (pack a directory by its name, not '.' or '/')");
    NormalizedRoot n;
    n.member_prefix = join(comps, comps.size());
    if (r.path[0] == '/') {
      n.original_path = "/" + n.member_prefix;
    } else {
      std::string base = cwd == "/" ? "" : cwd;
      n.original_path = base + "/" + n.member_prefix;
    }
    if (!r.member.empty()) {
      auto named = split_path(r.member);
      for (const auto& c : named)
        if (c == "..") return Status(ErrorCode::kInvalidArgument, "member name '" + r.member + "' contains '..'");
      if (named.empty()) return Status(ErrorCode::kInvalidArgument, "member name '" + r.member + "' names no member");
      n.member_prefix = join(named, named.size());
    }
    out.push_back(std::move(n));
  }
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = 0; j < out.size(); ++j) {
      if (i == j) continue;
      const auto& a = out[i].member_prefix;
      const auto& b = out[j].member_prefix;
      if (a == b || (b.size() > a.size() && b.compare(0, a.size(), a) == 0 && b[a.size()] == '/'))
        return Status(ErrorCode::kInvalidArgument,
                      "paths '" + roots[i].path + "' and '" + roots[j].path + "' overlap (both map to archive member " + b + ")");
    }
  return out;
}

namespace {

// read_xattrs over `list` (listxattr-like) and `get` (getxattr-like) calls on one file.
template <typename List, typename Get>
Result<std::vector<Xattr>> read_xattrs_with(const List& list, const Get& get, const std::string& what, XattrSet set) {
  std::vector<Xattr> out;
  ssize_t len = list(nullptr, 0);
  if (len < 0) {
    if (errno == ENOTSUP) return out;
    return errno_status("listing xattrs of " + what);
  }
  std::string names(static_cast<size_t>(len), '\0');
  len = list(names.data(), names.size());
  if (len < 0) return errno_status("listing xattrs of " + what);
  names.resize(static_cast<size_t>(len));
  for (size_t i = 0; i < names.size();) {
    std::string name(names.c_str() + i);
    i += name.size() + 1;
    const bool user = name.rfind("user.", 0) == 0;
    const bool stored = user || name.rfind("trusted.", 0) == 0 || name.rfind("security.", 0) == 0;
    if (set == XattrSet::kNone || !stored || (set == XattrSet::kUser && !user)) continue;
    ssize_t vlen = get(name.c_str(), nullptr, 0);
    if (vlen < 0) return errno_status("reading xattr " + name + " of " + what);
    std::string value(static_cast<size_t>(vlen), '\0');
    vlen = get(name.c_str(), value.data(), value.size());
    if (vlen < 0) return errno_status("reading xattr " + name + " of " + what);
    value.resize(static_cast<size_t>(vlen));
    out.push_back(Xattr{std::move(name), std::move(value)});
  }
  std::sort(out.begin(), out.end(), [](const Xattr& a, const Xattr& b) { return a.name < b.name; });
  return out;
}

}  // namespace

Result<std::vector<Xattr>> read_xattrs(int fd, const std::string& what, XattrSet set) {
  return read_xattrs_with([fd](char* buf, size_t size) { return ::flistxattr(fd, buf, size); },
                          [fd](const char* name, void* buf, size_t size) { return ::fgetxattr(fd, name, buf, size); }, what, set);
}

Result<std::vector<Xattr>> read_xattrs_at(const std::string& path, const std::string& what, XattrSet set) {
  const char* p = path.c_str();
  return read_xattrs_with([p](char* buf, size_t size) { return ::llistxattr(p, buf, size); },
                          [p](const char* name, void* buf, size_t size) { return ::lgetxattr(p, name, buf, size); }, what, set);
}

Result<uint32_t> add_implicit_ancestors(ScannedTree& t, const NormalizedRoot& r, const std::function<uint32_t(IndexNode, uint32_t)>& add) {
  auto comps = split_path(r.member_prefix);
  std::string base = r.original_path.substr(0, r.original_path.size() - r.member_prefix.size());  // ends with '/'
  uint32_t parent = 0;
  for (size_t i = 0; i + 1 < comps.size(); ++i) {
    uint32_t found = UINT32_MAX;
    for (uint32_t c : t.model.nodes[parent].children)
      if (t.model.nodes[c].name == comps[i]) found = c;
    if (found == UINT32_MAX) {
      IndexNode n;
      n.name = comps[i];
      n.type = EntryType::kDirectory;
      n.implicit_dir = true;
      struct stat st;
      if (::stat((base + join(comps, i + 1)).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) Scanner::fill_from_stat(n, st);
      found = add(std::move(n), parent);
    } else if (!t.model.nodes[found].implicit_dir) {
      return Status(ErrorCode::kInvalidArgument, "path " + r.original_path + " lies inside another path being packed");
    }
    parent = found;
  }
  return parent;
}

Result<ScannedTree> scan_tree(const std::vector<NormalizedRoot>& roots, XattrSet xattrs,
                              const std::function<void(const std::string&)>& warn) {
  ScannedTree t;
  Scanner s(t, xattrs, warn);
  IndexNode top;
  top.type = EntryType::kDirectory;
  top.mode = 0755;
  s.add_node(std::move(top), 0, -1);
  for (size_t ri = 0; ri < roots.size(); ++ri) {
    const auto& r = roots[ri];
    auto comps = split_path(r.member_prefix);
    LC_ASSIGN_OR_RETURN(uint32_t parent,
                        add_implicit_ancestors(t, r, [&](IndexNode n, uint32_t p) { return s.add_node(std::move(n), p, -1); }));
    std::string dir_path = r.original_path.substr(0, r.original_path.rfind('/'));
    int dfd = ::open(dir_path.empty() ? "/" : dir_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return errno_status("opening " + (dir_path.empty() ? std::string("/") : dir_path));
    Fd dir(dfd);
    struct stat st;
    if (::fstatat(dir.get(), comps.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno_status("lstat " + r.original_path);
    size_t before = t.model.nodes.size();
    s.start(dir.get(), parent);
    LC_RETURN_IF_ERROR(s.add_entry(comps.back(), st, parent, static_cast<int32_t>(ri), r.original_path));
    if (t.model.nodes.size() == before)
      return Status(ErrorCode::kInvalidArgument, "path " + r.original_path + " is not a file, directory or symlink");
    t.model.roots.push_back(IndexRootSpec{r.original_path, r.member_prefix, static_cast<uint32_t>(before)});
  }
  return t;
}

}  // namespace lazycache::format
