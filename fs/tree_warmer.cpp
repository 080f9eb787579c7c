// SPDX-License-Identifier: MIT
#include "fs/tree_warmer.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

namespace lazycache::fs {
namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

TreeWarmer::TreeWarmer(std::string mountpoint, uint64_t max_entries, std::vector<std::string> first, TreeWarmHooks hooks)
    : mountpoint_(std::move(mountpoint)), max_entries_(max_entries), first_(std::move(first)), hooks_(std::move(hooks)),
      started_ms_(now_ms()), thread_([this](std::stop_token stop) {
        const bool finished = walk(stop) && !stop.stop_requested();
        elapsed_ms_ = static_cast<uint64_t>(now_ms() - started_ms_);
        active_ = false;
        if (hooks_.ended) hooks_.ended(finished);
      }) {}

TreeWarmer::~TreeWarmer() {
  request_stop();
  join();
}

void TreeWarmer::join() {
  if (thread_.joinable()) thread_.join();
}

TreeWarmStats TreeWarmer::stats() const {
  TreeWarmStats s;
  s.entries = entries_.load();
  s.directories = directories_.load();
  s.active = active_.load();
  s.elapsed_ms = s.active ? static_cast<uint64_t>(now_ms() - started_ms_) : elapsed_ms_.load();
  return s;
}

bool TreeWarmer::walk(std::stop_token stop) {
  if (max_entries_ == 0) return true;
  struct stat root;
  if (::stat(mountpoint_.c_str(), &root) != 0) return false;
  device_ = root.st_dev;
  buf_.resize(64 << 10);
  auto room = [&] { return !stop.stop_requested() && entries_.load(std::memory_order_relaxed) < max_entries_; };
  // The hot directories first; the walk below takes their subdirectories from these listings.
  std::unordered_map<std::string, std::vector<std::string>> listed_first;
  for (const std::string& rel : first_) {
    if (!room()) return !stop.stop_requested();
    if (listed_first.count(rel) != 0) continue;
    std::vector<std::string> subdirs;
    if (!list(rel, subdirs, stop)) return false;
    listed_first.emplace(rel, std::move(subdirs));
  }
  // Depth first, in listing order: the archive's order (depth-first, by name), which is the
  // order the fill brings frames in. So the files of each frame become known one frame after the
  // other, just behind the fill, and each frame can be decoded and handed off whole as soon as
  // it is (Filesystem::note_known); breadth first made nearly every frame wait for the end of the
  // walk, since a frame holds directories of many depths. With the cap, the names listed are the
  // start of the archive, which is also what the fill covers first.
  std::vector<std::string> pending{""};  // a stack; "" is the mount point itself
  while (!pending.empty() && room()) {
    const std::string rel = std::move(pending.back());
    pending.pop_back();
    std::vector<std::string> subdirs;
    if (auto it = listed_first.find(rel); it != listed_first.end()) {
      subdirs = std::move(it->second);
    } else if (!list(rel, subdirs, stop)) {
      return false;
    }
    for (auto d = subdirs.rbegin(); d != subdirs.rend(); ++d) pending.push_back(std::move(*d));
  }
  return true;
}

bool TreeWarmer::list(const std::string& rel, std::vector<std::string>& subdirs, const std::stop_token& stop) {
  const std::string path = rel.empty() ? mountpoint_ : mountpoint_ + "/" + rel;
  // O_NOFOLLOW: a symlink the job put where a directory was is not followed off the mount.
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno != ENOTCONN && errno != ENODEV;  // else removed or renamed by the job meanwhile
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_dev != device_) {  // not on the mount any more
    ::close(fd);
    return false;
  }
  while (!stop.stop_requested()) {
    const ssize_t n = ::getdents64(fd, buf_.data(), buf_.size());
    if (n <= 0) break;
    for (ssize_t at = 0; at < n;) {
      const auto* d = reinterpret_cast<const dirent64*>(buf_.data() + at);
      at += d->d_reclen;
      if (std::strcmp(d->d_name, ".") == 0 || std::strcmp(d->d_name, "..") == 0) continue;
      entries_.fetch_add(1, std::memory_order_relaxed);
      if (d->d_type == DT_DIR) subdirs.push_back(rel.empty() ? std::string(d->d_name) : rel + "/" + d->d_name);
    }
  }
  ::close(fd);
  directories_.fetch_add(1, std::memory_order_relaxed);
  if (hooks_.listed_directory) hooks_.listed_directory();
  return true;
}

}  // namespace lazycache::fs
