// SPDX-License-Identifier: MIT
#include "format/sparse_write.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace lazycache::format {

namespace {

bool all_zero(const char* p, size_t len) { return p[0] == 0 && std::memcmp(p, p + 1, len - 1) == 0; }

}  // namespace

Status pwrite_sparse(int fd, const char* data, size_t n, uint64_t offset, uint64_t& end_written, const std::function<std::string()>& what) {
  size_t pos = 0;
  while (pos < n) {
    const size_t len = std::min(kZeroProbeBytes, n - pos);
    if (all_zero(data + pos, len)) {
      pos += len;
      continue;
    }
    // A run of chunks with data goes out in one pwrite (a 1 MiB file was 16 of them).
    size_t run_end = pos + len;
    while (run_end < n) {
      const size_t next = std::min(kZeroProbeBytes, n - run_end);
      if (all_zero(data + run_end, next)) break;
      run_end += next;
    }
    for (size_t done = pos; done < run_end;) {
      ssize_t w = ::pwrite(fd, data + done, run_end - done, static_cast<off_t>(offset + done));
      if (w < 0) {
        if (errno == EINTR) continue;
        const int err = errno;  // before what() runs
        return errno_status("writing " + what(), err);
      }
      done += static_cast<size_t>(w);
    }
    end_written = offset + run_end;
    pos = run_end;
  }
  return Status();
}

}  // namespace lazycache::format
