// SPDX-License-Identifier: MIT
#include "format/file_data.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "format/hashing.h"

namespace lazycache::format {

namespace {
constexpr size_t kReadChunkBytes = 1 << 20;
}  // namespace

Result<Fd> TreeFileOpener::open(uint32_t id, const std::string& what) {
  const auto& nodes = tree_.model.nodes;
  if (id < tree_.read_at.size() && !tree_.read_at[id].empty()) {
    // Only the very file the tree saw: a name under it swapped since (a directory renamed, a
    // symlink put in its way) gives another inode, and the file is read at its place instead.
    Fd fd(::open(tree_.read_at[id].c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st;
    if (fd.valid() && ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) &&
        std::make_pair(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)) == tree_.dev_ino[id])
      return fd;
  }
  int32_t ri = tree_.node_root[id];
  const auto& root = tree_.model.roots[static_cast<size_t>(ri)];
  if (root.node == id) {
    int fd = ::open(root.original_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno_status("opening " + root.original_path);
    return Fd(fd);
  }
  if (ri != root_ || !root_dir_.valid()) {
    LC_ASSIGN_OR_RETURN(root_dir_, open_dir_path(root.original_path, false));
    root_ = ri;
    dirs_.reset(DirStack::Tree{[this](EntryId n) { return tree_.model.nodes[n].parent; },
                               [this](EntryId n) { return tree_.model.nodes[n].name; }, 0},
                root_dir_.get(), root.node);
  }
  LC_ASSIGN_OR_RETURN(int dir, dirs_.open(nodes[id].parent, [&] { return what; }));
  int fd = ::openat(dir, nodes[id].name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno_status("opening " + what);
  return Fd(fd);
}

Result<FileData> append_file_data(int fd, uint64_t size, uint64_t target, std::string& frame, const std::function<Status()>& flush,
                                  const std::function<void(uint64_t)>& consumed, const std::string& what) {
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  Xxh3Stream hash;
  uint64_t remaining = size;
  bool short_read = false;
  while (remaining > 0) {
    // Split a member only when at least a quarter frame would spill over: small files stay
    // whole in one frame, big ones are cut at the target size.
    if (frame.size() >= target && remaining >= target / 4) LC_RETURN_IF_ERROR(flush());
    uint64_t room = frame.size() < target ? target - frame.size() : remaining;
    size_t chunk = static_cast<size_t>(std::min<uint64_t>({remaining, room, kReadChunkBytes}));
    size_t old = frame.size();
    frame.resize(old + chunk);
    size_t got = 0;
    while (got < chunk && !short_read) {
      ssize_t r = ::read(fd, frame.data() + old + got, chunk - got);
      if (r < 0) {
        if (errno == EINTR) continue;
        return errno_status("reading " + what);
      }
      if (r == 0) short_read = true;
      got += static_cast<size_t>(r);
    }
    std::fill(frame.begin() + static_cast<std::ptrdiff_t>(old + got), frame.end(), '\0');
    hash.update(std::as_bytes(std::span<const char>(frame.data() + old, chunk)));
    remaining -= chunk;
    consumed(chunk);
  }
  char extra;
  FileData out;
  out.size_changed = short_read || ::read(fd, &extra, 1) > 0;
  out.digest = hash.digest();
  return out;
}

}  // namespace lazycache::format
