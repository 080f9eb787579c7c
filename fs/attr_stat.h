// SPDX-License-Identifier: MIT
// File: fs/attr_stat.h -- an entry's Attr (fs/filesystem.h) as the struct stat a mount reports:
// one conversion for the read-only op table (fs/fuse_adapter.cpp) and the overlay's archive
// entries (fs/overlay.cpp). FUSE-free; pure functions, thread-safe.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <ctime>

#include "fs/filesystem.h"

namespace lazycache::fs {

// Nanoseconds since the epoch as a timespec; times before 1970 (negative) included: tv_nsec is
// always in [0, 1e9), as utimensat and the kernel require.
timespec to_timespec(int64_t ns);

// The stat of an entry with attributes `a` and inode number `ino`: mode, link count, owner and
// size from `a`; st_blocks in 512-byte units rounded up, st_blksize 4096 (what du and cp expect
// of a file that is not sparse); atime and ctime equal to mtime, the only time an archive keeps.
// Every other field is zero.
struct stat to_stat(const Attr& a, uint64_t ino);

}  // namespace lazycache::fs
