// SPDX-License-Identifier: MIT
#include "common/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace lazycache {

Status ByteSource::read_ranges(std::span<ReadRequest> requests) const {
  for (auto& r : requests) {
    auto n = read_at(r.offset, r.out);
    if (!n.ok()) return n.error();
    r.bytes_read = *n;
  }
  return Status();
}

Result<size_t> ByteSource::read_at_streaming(uint64_t offset, std::span<std::byte> out, const ReadProgress& progress) const {
  auto n = read_at(offset, out);
  if (n.ok() && progress) progress(*n);
  return n;
}

Result<std::unique_ptr<LocalFileSource>> LocalFileSource::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status("opening " + path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Status s = errno_status("stat " + path);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(ErrorCode::kInvalidArgument, path + " is not a regular file");
  }
  return std::unique_ptr<LocalFileSource>(new LocalFileSource(fd, static_cast<uint64_t>(st.st_size), path));
}

LocalFileSource::~LocalFileSource() { ::close(fd_); }

Result<size_t> LocalFileSource::read_at(uint64_t offset, std::span<std::byte> out) const {
  size_t done = 0;
  while (done < out.size() && offset + done < size_) {
    ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("reading " + path_ + " at offset " + std::to_string(offset + done));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

Result<size_t> MemorySource::read_at(uint64_t offset, std::span<std::byte> out) const {
  if (offset >= bytes_.size()) return size_t{0};
  size_t n = std::min<uint64_t>(out.size(), bytes_.size() - offset);
  std::memcpy(out.data(), bytes_.data() + offset, n);
  return n;
}

}  // namespace lazycache
