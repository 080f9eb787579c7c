// SPDX-License-Identifier: MIT
// File: fs/chunk_cache_check.h -- is the chunk cache's LMDB index safe to open? (issue 13)
//
// LMDB has no page checksums: a few flipped bytes in a live page of index.mdb send its B-tree
// code through wild pointers (SIGSEGV, SIGBUS in the mount daemon or `cache gc`), and since the
// cache is shared and persistent every later mount would crash the same way. A zeroed,
// truncated or meta-damaged file fails every open with MDB_INVALID. The cache is disposable, so
// the answer to damage is to set it aside and start afresh, once, with a warning.
//
// How damage is found: a child process (a fresh image of this executable, started with
// posix_spawn: never a fork of the caller, whose other threads' locks a forked child would
// inherit; chunk_cache_check.cpp) opens the index read-only (a reader like any other: it
// registers in the lock file, so live writers never recycle the pages it walks) and walks
// every table, the freelist included, touching every key and value and checking what LMDB
// itself trusts blindly: each row lies inside the file, keys ascend, rows have the shape the
// cache writes, the freelist names only pages of the file. A crash or an LMDB error in the child
// is the verdict "damaged" too, and the parent never touches the pages itself. A
// clean walk is remembered in index.mdb.checked, keyed by the file's device, inode, size,
// mtime and ctime: every write changes ctime (user space cannot set it), so an unchanged file
// is not walked again, and a file changed since (by a mount that then crashed, by a bit flip
// that went through the filesystem) is. Cost: a process start and a walk of the rows, which are small
// (a few hundred bytes per cached frame): measured in docs/reliability.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>

#include "common/status.h"

namespace lazycache::fs {

struct IndexCheck {
  bool damaged = false;
  std::string problem;  // what the walk hit, when damaged
};

// Walks the LMDB file `path` in a child process (see above), at most `limit` (a child still
// walking then is killed and the file counted as damaged). A file that does not exist, or that
// cannot be opened for another reason than damage (EACCES), is not damaged: the caller's own
// open reports that.
// `map_size` is the cache's LMDB map size.
IndexCheck check_index(const std::string& path, size_t map_size, std::chrono::milliseconds limit = std::chrono::seconds(30));

// True when `path` is unchanged since mark_checked(path) recorded it.
bool checked_before(const std::string& path);
// Records the file's identity after a clean walk, unless it changed since `before` (its stat
// line from identity_of()) was taken: a write racing the walk makes the next open walk again.
void mark_checked(const std::string& path, const std::string& before);
// "dev ino size mtime ctime" of `path`, or "" when it cannot be stat'ed.
std::string identity_of(const std::string& path);

// Whether the index is still as checked when this process closes it: every write since the
// check was this process's own (LMDB's, through its transactions). Then the file at close
// needs no walk at the next open, and closing marks it checked; a write of another process
// (seen as an identity that changed between two commits of ours), or a process that dies
// without closing, leaves the marker stale, so the next open walks. Before this, every mount
// that stored a frame made the next mount walk the whole index (0.1-0.6 s for 20,000-200,000
// rows, a process start for a small one).
// Thread-safe; before_commit() and after_commit() are called inside a write transaction
// (LMDB's writer lock orders them with every other writer's commits).
class OwnWritesWatch {
 public:
  explicit OwnWritesWatch(std::string path) : path_(std::move(path)) {}
  // The file as it is now was walked clean, or trusted by its marker.
  void trust_from_now();
  void before_commit();
  void after_commit();
  // At close, with the environment closed: marks the file checked when only this process
  // wrote it since trust_from_now().
  void mark_if_only_own();

 private:
  std::mutex mu_;
  const std::string path_;
  std::string last_;  // identity_of(path_) after this process's last commit
  bool trusted_ = false, foreign_ = false;
};

// Moves `dir`/index.mdb aside as index.mdb.damaged (replacing an older one: one is kept for
// inspection) and removes its lock file and marker, so that the next open creates an empty
// index. Mounts still using the old file keep it (they have it open) and are unaffected.
Status set_index_aside(const std::string& dir);

}  // namespace lazycache::fs
