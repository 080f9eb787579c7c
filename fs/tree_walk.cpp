// SPDX-License-Identifier: MIT
#include "fs/tree_walk.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "common/helper_process.h"

namespace lazycache::fs {
namespace {

// Set in the child's environment (common/helper_process.h).
constexpr const char* kRequestVariable = "LAZYCACHE_INTERNAL_TREE_WALK";
constexpr size_t kMaxRequestBytes = 64u << 20;

// The request on the socket: the mount point, the cap in decimal, then the first directories,
// each ended by a NUL (no path holds one).
std::string encode(const TreeWalkRequest& r) {
  std::string out = r.root_fd >= 0 ? std::string() : r.mountpoint;  // empty: the passed descriptor
  out += '\0';
  out += std::to_string(r.max_entries);
  out += '\0';
  for (const std::string& f : r.first) {
    out += f;
    out += '\0';
  }
  return out;
}

bool decode(std::string_view text, TreeWalkRequest& r) {
  std::vector<std::string_view> fields;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\0', at);
    if (end == std::string_view::npos) return false;  // cut short
    fields.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  if (fields.size() < 2 || (!fields[0].empty() && fields[0][0] != '/')) return false;
  r.mountpoint = std::string(fields[0]);
  if (r.mountpoint.empty()) r.root_fd = kHelperPassedFd;
  const auto [p, ec] = std::from_chars(fields[1].data(), fields[1].data() + fields[1].size(), r.max_entries);
  if (ec != std::errc() || p != fields[1].data() + fields[1].size()) return false;
  for (size_t i = 2; i < fields.size(); ++i) r.first.emplace_back(fields[i]);
  return true;
}

// The walk itself, in the child: see fs/tree_warmer.h for the order and why.
class Walk {
 public:
  Walk(TreeWalkRequest request, int events_fd) : r_(std::move(request)), events_fd_(events_fd) {}

  // False when the walk could not go on (the mount is gone).
  bool run() {
    if (r_.max_entries == 0) return true;
    struct stat root;
    if ((r_.root_fd >= 0 ? ::fstat(r_.root_fd, &root) : ::stat(r_.mountpoint.c_str(), &root)) != 0) return false;
    device_ = root.st_dev;
    buf_.resize(64 << 10);
    // The hot directories first; the walk below takes their subdirectories from these listings.
    std::unordered_map<std::string, std::vector<std::string>> listed_first;
    for (const std::string& rel : r_.first) {
      if (!room()) return true;
      if (listed_first.count(rel) != 0) continue;
      std::vector<std::string> subdirs;
      if (!list(rel, subdirs)) return false;
      listed_first.emplace(rel, std::move(subdirs));
    }
    // Depth first, in listing order: the archive's order (fs/tree_warmer.h says why).
    std::vector<std::string> pending{""};  // a stack; "" is the mount point itself
    while (!pending.empty() && room()) {
      const std::string rel = std::move(pending.back());
      pending.pop_back();
      std::vector<std::string> subdirs;
      if (auto it = listed_first.find(rel); it != listed_first.end()) {
        subdirs = std::move(it->second);
      } else if (!list(rel, subdirs)) {
        return false;
      }
      for (auto d = subdirs.rbegin(); d != subdirs.rend(); ++d) pending.push_back(std::move(*d));
    }
    return true;
  }

 private:
  bool room() const { return entries_ < r_.max_entries; }

  // Lists directory `rel` (below the mount point); its subdirectories go to `subdirs`. False when
  // the walk must end (the mount is gone); a directory the job removed meanwhile is skipped.
  bool list(const std::string& rel, std::vector<std::string>& subdirs) {
    // O_NOFOLLOW: a symlink the job put where a directory was is not followed off the mount.
    constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    const int fd = r_.root_fd >= 0 ? ::openat(r_.root_fd, rel.empty() ? "." : rel.c_str(), kFlags)
                                   : ::open((rel.empty() ? r_.mountpoint : r_.mountpoint + "/" + rel).c_str(), kFlags);
    if (fd < 0) return errno != ENOTCONN && errno != ENODEV;  // else removed or renamed by the job meanwhile
    struct stat st;
    if (::fstat(fd, &st) != 0 || st.st_dev != device_) {  // not on the mount any more
      ::close(fd);
      return false;
    }
    TreeWalkEvent event;
    while (true) {
      const ssize_t n = ::getdents64(fd, buf_.data(), buf_.size());
      if (n <= 0) break;
      for (ssize_t at = 0; at < n;) {
        const auto* d = reinterpret_cast<const dirent64*>(buf_.data() + at);
        at += d->d_reclen;
        if (std::strcmp(d->d_name, ".") == 0 || std::strcmp(d->d_name, "..") == 0) continue;
        ++event.entries;
        if (d->d_type == DT_DIR) subdirs.push_back(rel.empty() ? std::string(d->d_name) : rel + "/" + d->d_name);
      }
    }
    ::close(fd);
    entries_ += event.entries;
    // A failed send means the daemon is gone: nothing is left to warm for.
    if (::send(events_fd_, &event, sizeof event, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof event)) ::_exit(kTreeWalkEnded);
    return true;
  }

  const TreeWalkRequest r_;
  const int events_fd_;
  dev_t device_ = 0;  // the mount's, from the walk's start
  uint64_t entries_ = 0;
  std::vector<char> buf_;
};

// The child's side: runs before the program's main() when the request variable is set, and exits.
[[gnu::constructor]] void walk_if_requested() {
  if (!become_helper(kRequestVariable, "lazycache-walk", kTreeWalkEnded)) return;
  std::string text;
  char buf[16384];
  while (text.size() <= kMaxRequestBytes) {
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  TreeWalkRequest request;
  if (!decode(text, request)) ::_exit(kTreeWalkEnded);
  Walk walk(std::move(request), STDOUT_FILENO);
  ::_exit(walk.run() ? kTreeWalkFinished : kTreeWalkEnded);
}

}  // namespace

TreeWalkProcess spawn_tree_walk(const TreeWalkRequest& request) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return {};
  const pid_t pid = spawn_helper(kRequestVariable, "lazycache-tree-walk", fds[1], request.root_fd);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return {};
  }
  // The child reads the whole request before it lists anything, so this cannot block on it. A
  // child that died early shows as the end of its events and its exit code, not here.
  const std::string text = encode(request);
  for (size_t sent = 0; sent < text.size();) {
    const ssize_t n = ::send(fds[0], text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fds[0], SHUT_WR);
  return {pid, fds[0]};
}

}  // namespace lazycache::fs
