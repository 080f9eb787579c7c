// SPDX-License-Identifier: MIT
#include "fs/attr_stat.h"

#include <cstring>

namespace lazycache::fs {

timespec to_timespec(int64_t ns) {
  timespec t{ns / 1000000000, ns % 1000000000};
  if (t.tv_nsec < 0) {  // C++ division truncates toward zero: -1 ns is (0, -1), which means (-1, 999999999)
    t.tv_nsec += 1000000000;
    t.tv_sec -= 1;
  }
  return t;
}

struct stat to_stat(const Attr& a, uint64_t ino) {
  struct stat st;
  std::memset(&st, 0, sizeof(st));
  st.st_ino = ino;
  st.st_mode = a.mode;
  st.st_nlink = a.nlink;
  st.st_uid = a.uid;
  st.st_gid = a.gid;
  st.st_size = static_cast<off_t>(a.size);
  st.st_blksize = 4096;
  st.st_blocks = static_cast<blkcnt_t>((a.size + 511) / 512);
  st.st_mtim = to_timespec(a.mtime_ns);
  st.st_atim = st.st_mtim;
  st.st_ctim = st.st_mtim;
  return st;
}

}  // namespace lazycache::fs
