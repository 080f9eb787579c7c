// SPDX-License-Identifier: MIT
// Reference-model test of the writable mount (in the spirit of mountpoint-s3's reftests): random
// sequences of file-system operations are applied through FUSE to the mount and, with the same
// system calls, to a plain copy of the archived tree. Every step must succeed or fail alike (same
// errno), and after every step the two trees must be equal: type, mode, size, content, symlink
// target and link count of every entry; and the tree an incremental save builds from the archive
// index and upper/ (fs/overlay_tree.h) must be the one a scan of the mount finds. Seeded: a failure prints its seed and step, and
// LC_REFTEST_SEED=N reruns that one sequence. Skipped when /dev/fuse cannot be opened.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/posix_files.h"
#include "format/pack_order.h"
#include "fs/overlay_tree.h"
#include "mounted_overlay.h"

using namespace lazycache;
using lazycache::testing::MountedOverlay;

namespace {

constexpr int kSteps = 100;

// One line per entry below `root`, keyed by its relative path.
void describe(const std::string& root, const std::string& rel, std::map<std::string, std::string>& out) {
  for (const std::string& name : list_dir(rel.empty() ? root : root + "/" + rel)) {
    const std::string path = rel.empty() ? name : rel + "/" + name;
    const std::string full = root + "/" + path;
    struct stat st;
    if (::lstat(full.c_str(), &st) != 0) {
      out[path] = "lstat failed: " + std::to_string(errno);
      continue;
    }
    std::ostringstream d;
    d << std::oct << (st.st_mode & S_IFMT) << " " << (st.st_mode & 07777) << std::dec;
    if (S_ISREG(st.st_mode)) {
      auto bytes = read_whole_file(full, 64 << 20);
      d << " size=" << st.st_size << " nlink=" << st.st_nlink
        << " content=" << (bytes.ok() ? testing::digest_of(*bytes).hex() : bytes.error().to_string());
    } else if (S_ISLNK(st.st_mode)) {
      char buf[4096];
      const ssize_t n = ::readlink(full.c_str(), buf, sizeof buf);
      d << " -> " << (n >= 0 ? std::string(buf, static_cast<size_t>(n)) : "readlink failed");
    } else if (S_ISDIR(st.st_mode)) {
      describe(root, path, out);
    }
    out[path] = d.str();
  }
}

// The first difference of the two trees, or "" when they are equal.
std::string difference(const std::string& mount, const std::string& plain) {
  std::map<std::string, std::string> a, b;
  describe(mount, "", a);
  describe(plain, "", b);
  for (const auto& [path, d] : b) {
    auto it = a.find(path);
    if (it == a.end()) return path + ": missing on the mount (plain: " + d + ")";
    if (it->second != d) return path + ": mount " + it->second + ", plain " + d;
  }
  for (const auto& [path, d] : a) {
    if (!b.count(path)) return path + ": only on the mount (" + d + ")";
  }
  return "";
}

int errno_of(int rc) { return rc < 0 ? errno : 0; }

// What `unmount --save` builds from the base index and upper/ (fs/overlay_tree.h) against what a
// scan of the mount finds: "" when they agree. Both name the root by the mount's own path (a
// scan finds a root on disk by its member name's last component).
std::string tree_difference(const MountedOverlay& m) {
  const auto root = m.lower->index().lookup_path("src");
  if (!root) return "no src in the archive";
  auto built = fs::merged_overlay_tree(m.lower->index(), {fs::OverlayTreeRoot{m.mnt, "", *root, m.overlay->upper_dir()}},
                                       fs::OverlayTreeOptions{format::XattrSet::kUser, std::nullopt, {}});
  if (!built.ok()) return "merged_overlay_tree: " + built.error().to_string();
  auto scanned = format::scan_for_pack({format::PackRoot{m.mnt}}, format::XattrSet::kUser, [](const std::string&) {});
  if (!scanned.ok()) return "scan of the mount: " + scanned.error().to_string();
  return fs::scanned_tree_difference(*built, *scanned);
}

// A random operation, chosen against the plain tree and applied to `root`; the result is errno.
class Operations {
 public:
  explicit Operations(uint64_t seed) : rng_(seed) {}

  // Picks the next operation from the plain tree's current entries (the mount must agree).
  void choose(const std::string& plain) {
    std::map<std::string, std::string> entries;
    describe(plain, "", entries);
    std::vector<std::string> paths{""};  // "" is the root: a directory
    for (const auto& [p, d] : entries) paths.push_back(p);
    auto pick = [&] { return paths[std::uniform_int_distribution<size_t>(0, paths.size() - 1)(rng_)]; };
    auto fresh = [&] {
      std::string dir = pick();
      const std::string name = "n" + std::to_string(counter_++);
      return dir.empty() ? name : dir + "/" + name;
    };
    kind_ = std::uniform_int_distribution<int>(0, 12)(rng_);
    // Never the root itself as the entry operated on: renaming or removing a mount point is a
    // VFS matter (EXDEV, EBUSY), not the overlay's.
    do {
      a_ = pick();
    } while (a_.empty() && paths.size() > 1);
    b_ = std::uniform_int_distribution<int>(0, 2)(rng_) == 0 ? pick() : fresh();
    if (kind_ == 3 || kind_ == 6 || kind_ == 9) a_ = fresh();  // mkdir, symlink, create: new names mostly
    offset_ = std::uniform_int_distribution<uint64_t>(0, 400000)(rng_);
    size_ = std::uniform_int_distribution<size_t>(1, 70000)(rng_);
    fill_ = static_cast<char>('a' + std::uniform_int_distribution<int>(0, 25)(rng_));
    mode_ = std::vector<mode_t>{0600, 0644, 0755, 0700}[std::uniform_int_distribution<size_t>(0, 3)(rng_)];
  }

  std::string describe_op() const {
    static const char* kNames[] = {"write", "truncate", "unlink",      "mkdir",  "rmdir",   "rename",  "symlink",
                                   "link",  "chmod",    "create-excl", "append", "utimens", "setxattr"};
    return std::string(kNames[kind_]) + " '" + a_ + "' '" + b_ + "' off=" + std::to_string(offset_) + " size=" + std::to_string(size_) +
           " mode=" + std::to_string(mode_);
  }

  int apply(const std::string& root) const {
    const std::string a = root + "/" + a_, b = root + "/" + b_;
    switch (kind_) {
      case 0: return write_at(a, O_WRONLY | O_CREAT, offset_);
      case 1: return errno_of(::truncate(a.c_str(), static_cast<off_t>(offset_)));
      case 2: return errno_of(::unlink(a.c_str()));
      case 3: return errno_of(::mkdir(a.c_str(), mode_));
      case 4: return errno_of(::rmdir(a.c_str()));
      case 5: return errno_of(::rename(a.c_str(), b.c_str()));
      case 6: return errno_of(::symlink(b_.c_str(), a.c_str()));
      case 7: return errno_of(::link(a.c_str(), b.c_str()));
      case 8: return errno_of(::chmod(a.c_str(), mode_));
      case 9: return write_at(a, O_WRONLY | O_CREAT | O_EXCL, 0);
      case 11: {  // a time of its own per operation, so a lost change shows
        const timespec t[2] = {{static_cast<time_t>(1500000000 + offset_), 0}, {static_cast<time_t>(1500000000 + offset_), 123}};
        return errno_of(::utimensat(AT_FDCWD, a.c_str(), t, 0));
      }
      case 12: return errno_of(::setxattr(a.c_str(), "user.reftest", b_.data(), b_.size(), 0));
      default: return write_at(a, O_WRONLY | O_APPEND, 0);
    }
  }

 private:
  int write_at(const std::string& path, int flags, uint64_t offset) const {
    UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC, mode_));
    if (!fd.valid()) return errno;
    const std::string data(size_, fill_);
    const ssize_t n = (flags & O_APPEND) ? ::write(fd.get(), data.data(), data.size())
                                         : ::pwrite(fd.get(), data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) return errno;
    return ::close(fd.release()) == 0 ? 0 : errno;
  }

  std::mt19937_64 rng_;
  uint64_t counter_ = 0;
  int kind_ = 0;
  std::string a_, b_;
  uint64_t offset_ = 0;
  size_t size_ = 0;
  char fill_ = 'a';
  mode_t mode_ = 0644;
};

void run_sequence(uint64_t seed) {
  MountedOverlay m(6);
  Operations ops(seed);
  for (int step = 0; step < kSteps; ++step) {
    ops.choose(m.plain);
    const int on_plain = ops.apply(m.plain);
    const int on_mount = ops.apply(m.mnt);
    INFO("seed " << seed << " step " << step << ": " << ops.describe_op());
    REQUIRE(on_mount == on_plain);
    const std::string diff = difference(m.mnt, m.plain);
    INFO(diff);
    REQUIRE(diff.empty());
    const std::string tree_diff = tree_difference(m);
    INFO("tree built for unmount --save: " << tree_diff);
    REQUIRE(tree_diff.empty());
  }
}

}  // namespace

TEST_CASE("writable mount reference model: random operations do the same to the mount and to a plain directory", "[fuse]") {
  if (!testing::fuse_usable()) {
    WARN("skipped: /dev/fuse cannot be opened");
    return;
  }
  ::umask(022);
  if (const char* s = std::getenv("LC_REFTEST_SEED"); s != nullptr && *s != '\0') {
    run_sequence(std::strtoull(s, nullptr, 10));
    return;
  }
  for (uint64_t seed : {1, 3}) run_sequence(seed);
}
