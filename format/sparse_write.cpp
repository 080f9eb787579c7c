// SPDX-License-Identifier: MIT
#include "format/sparse_write.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace lazycache::format {

Status pwrite_sparse(int fd, const char* data, size_t n, uint64_t offset, uint64_t& end_written, const std::string& what) {
  size_t pos = 0;
  while (pos < n) {
    const size_t len = std::min(kZeroProbeBytes, n - pos);
    const char* p = data + pos;
    const bool zero = p[0] == 0 && std::memcmp(p, p + 1, len - 1) == 0;
    if (!zero) {
      size_t done = 0;
      while (done < len) {
        ssize_t w = ::pwrite(fd, p + done, len - done, static_cast<off_t>(offset + pos + done));
        if (w < 0) {
          if (errno == EINTR) continue;
          return errno_status("writing " + what);
        }
        done += static_cast<size_t>(w);
      }
      end_written = offset + pos + len;
    }
    pos += len;
  }
  return Status();
}

}  // namespace lazycache::format
