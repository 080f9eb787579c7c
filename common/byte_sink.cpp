// SPDX-License-Identifier: MIT
#include "common/byte_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "common/posix_files.h"

namespace lazycache {

Result<std::unique_ptr<LocalFileSink>> LocalFileSink::create(const std::string& path) {
  std::string tmp = unique_temp_name(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status("creating " + tmp);
  return std::unique_ptr<LocalFileSink>(new LocalFileSink(fd, path, tmp));
}

LocalFileSink::~LocalFileSink() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

Status LocalFileSink::write(std::span<const std::byte> bytes) {
  if (committed_) return Status(ErrorCode::kInternal, "write after commit to " + path_);
  LC_RETURN_IF_ERROR(write_all(fd_, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), "writing " + tmp_));
  written_ += bytes.size();
  return Status();
}

Status LocalFileSink::commit() {
  if (::fsync(fd_) != 0) return errno_status("fsync " + tmp_);
  if (::close(fd_) != 0) {
    fd_ = -1;
    return errno_status("closing " + tmp_);
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) return errno_status("renaming " + tmp_ + " to " + path_);
  committed_ = true;
  return Status();
}

}  // namespace lazycache
