// SPDX-License-Identifier: MIT
// File: tests/format/tree_util.h -- test helpers: temporary directories, tree builders, and a
// tree comparison that checks what a round trip must preserve (type, mode, size, content,
// mtime to the nanosecond, symlink targets, hardlink groups).
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace lazycache::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/lc-format-test.XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp");
    path_ = tmpl;
  }
  ~TempDir() { std::system(("chmod -R u+rwx '" + path_ + "' 2>/dev/null; rm -rf '" + path_ + "'").c_str()); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& content, mode_t mode = 0644) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode);
  if (fd < 0) throw std::runtime_error("create " + path);
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n <= 0) throw std::runtime_error("write " + path);
    done += static_cast<size_t>(n);
  }
  ::fchmod(fd, mode);
  ::close(fd);
}

inline void set_mtime(const std::string& path, int64_t sec, long nsec) {
  struct timespec ts[2] = {{0, UTIME_OMIT}, {sec, nsec}};
  if (::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) throw std::runtime_error("utimensat " + path);
}

// Deterministic pseudo-random content that depends on the seed.
inline std::string pattern(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (size_t i = 0; i < n; ++i) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    // Half compressible, half random-ish, like real trees.
    s[i] = (i / 64) % 2 ? static_cast<char>('a' + (i % 26)) : static_cast<char>(x >> 56);
  }
  return s;
}

inline std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("open " + path);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// Compares trees `a` and `b`; returns "" if equal, else the first difference. Directory mtimes
// are compared too. With `content` false, regular file contents are compared by size only.
inline std::string compare_trees(const std::string& a, const std::string& b, bool content = true) {
  std::map<ino_t, std::string> links_a, links_b;  // first path seen per inode (hardlink groups)
  std::vector<std::string> stack{""};
  while (!stack.empty()) {
    std::string rel = stack.back();
    stack.pop_back();
    std::string pa = rel.empty() ? a : a + "/" + rel, pb = rel.empty() ? b : b + "/" + rel;
    struct stat sa, sb;
    if (::lstat(pa.c_str(), &sa) != 0) return "missing in a: " + rel;
    if (::lstat(pb.c_str(), &sb) != 0) return "missing in b: " + rel;
    if ((sa.st_mode & S_IFMT) != (sb.st_mode & S_IFMT)) return "type differs: " + rel;
    if ((sa.st_mode & 07777) != (sb.st_mode & 07777)) return "mode differs: " + rel;
    if (!S_ISLNK(sa.st_mode) && (sa.st_mtim.tv_sec != sb.st_mtim.tv_sec || sa.st_mtim.tv_nsec != sb.st_mtim.tv_nsec))
      return "mtime differs: " + rel;
    if (S_ISLNK(sa.st_mode)) {
      char ta[8192], tb[8192];
      ssize_t na = ::readlink(pa.c_str(), ta, sizeof ta), nb = ::readlink(pb.c_str(), tb, sizeof tb);
      if (na != nb || std::string(ta, static_cast<size_t>(na)) != std::string(tb, static_cast<size_t>(nb)))
        return "symlink target differs: " + rel;
      if (sa.st_mtim.tv_sec != sb.st_mtim.tv_sec || sa.st_mtim.tv_nsec != sb.st_mtim.tv_nsec) return "symlink mtime differs: " + rel;
    } else if (S_ISREG(sa.st_mode)) {
      if (sa.st_size != sb.st_size) return "size differs: " + rel;
      if (sa.st_nlink != sb.st_nlink) return "link count differs: " + rel;
      if (sa.st_nlink > 1) {
        auto [ia, newa] = links_a.emplace(sa.st_ino, rel);
        auto [ib, newb] = links_b.emplace(sb.st_ino, rel);
        if (newa != newb || ia->second != ib->second) return "hardlink grouping differs: " + rel;
      }
      if (content && read_file(pa) != read_file(pb)) return "content differs: " + rel;
    } else if (S_ISDIR(sa.st_mode)) {
      auto list = [](const std::string& p) {
        std::vector<std::string> names;
        DIR* d = ::opendir(p.c_str());
        if (!d) return names;
        while (auto* de = ::readdir(d)) {
          std::string n = de->d_name;
          if (n != "." && n != "..") names.push_back(n);
        }
        ::closedir(d);
        std::sort(names.begin(), names.end());
        return names;
      };
      auto na = list(pa), nb = list(pb);
      if (na != nb)
        return "directory listing differs: " + rel + " (" + std::to_string(na.size()) + " vs " + std::to_string(nb.size()) + " entries)";
      for (const auto& n : na) stack.push_back(rel.empty() ? n : rel + "/" + n);
    }
  }
  return "";
}

}  // namespace lazycache::testing
