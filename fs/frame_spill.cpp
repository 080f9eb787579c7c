// SPDX-License-Identifier: MIT
#include "fs/frame_spill.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "fs/local_files.h"

namespace lazycache::fs {

Result<std::shared_ptr<SpilledFrame>> SpilledFrame::create(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // No O_TMPFILE on this filesystem: a named file, unlinked at once.
    std::string name = dir + "/lazycache-spill.XXXXXX";
    fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd >= 0) ::unlink(name.c_str());
  }
  if (fd < 0) return errno_status("spilling a large frame: cannot create a temporary file in " + dir);
  return std::shared_ptr<SpilledFrame>(new SpilledFrame(fd));
}

SpilledFrame::~SpilledFrame() { ::close(fd_); }

Status SpilledFrame::append(std::span<const std::byte> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(size_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return errno_status("spilling a large frame to a temporary file");
    done += static_cast<size_t>(n);
  }
  size_ += bytes.size();
  return Status();
}

Result<FramePtr> SpilledFrame::read(uint64_t offset, size_t length) const {
  if (offset > size_ || length > size_ - offset) {
    return Status(ErrorCode::kCorrupt, "spilled frame holds " + std::to_string(size_) + " bytes, read asks for " + std::to_string(offset) +
                                           "+" + std::to_string(length));
  }
  auto out = std::make_shared<FrameBytes>(length);  // every byte read below
  size_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd_, out->data() + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_status("reading a spilled frame");
    if (n == 0) return Status(ErrorCode::kCorrupt, "spilled frame file is shorter than written");
    done += static_cast<size_t>(n);
  }
  return FramePtr(std::move(out));
}

SpilledFramePtr FrameSpill::get(uint32_t frame) {
  std::lock_guard lock(mu_);
  auto it = map_.find(frame);
  if (it == map_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.second);
  return it->second.first;
}

void FrameSpill::put(uint32_t frame, SpilledFramePtr spilled) {
  std::lock_guard lock(mu_);
  if (map_.count(frame) != 0) return;
  lru_.push_front(frame);
  map_.emplace(frame, std::make_pair(std::move(spilled), lru_.begin()));
  while (map_.size() > max_frames_) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
}

size_t FrameSpill::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}

}  // namespace lazycache::fs
