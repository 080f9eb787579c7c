// SPDX-License-Identifier: MIT
// File: format/archive_writer.h -- write_archive(): local paths -> a lazycache archive on a ByteSink.
//
// Design: a streaming pipeline with bounded memory, never seeking the sink:
//   scan (lstat the trees, sort children bytewise) -> one producer thread that reads files and
//   emits the pax tar stream cut into frames -> `threads` compression workers (one-shot
//   ZSTD_compress2, so every frame carries Frame_Content_Size) -> the calling thread, which
//   writes frames to the sink in order, then the index frame and the seek table.
// At most about 2 x threads + 2 frames are alive at once, so memory is
// O(threads x frame_size + entry count), whatever the size of the files.
// Output is deterministic: the same tree and config give the same bytes whatever `threads` is
// (no atime/ctime, children sorted bytewise, frame cuts decided by the producer alone).
// See docs/archive-format.md for the layout and the frame-cutting rule.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/byte_sink.h"
#include "common/status.h"

namespace lazycache::format {

// One path to save. Absolute paths are stored without the leading '/' ("/root/.npm" ->
// member prefix "root/.npm"); relative paths are stored as given, normalised ("./a//b/" ->
// "a/b"). Paths with ".." components, "." alone, and overlapping roots are rejected.
//
// `member`, when set, is the member prefix instead (normalised the same way): a save that builds
// on an earlier archive names each path as that archive did, wherever it is now.
struct PackRoot {
  std::string path;
  std::string member = std::string();
};

struct PackProgress {
  uint64_t files_done = 0;
  uint64_t files_total = 0;
  uint64_t bytes_in = 0;        // file bytes read so far
  uint64_t bytes_in_total = 0;  // sum of file sizes found by the scan
  uint64_t bytes_out = 0;       // archive bytes written to the sink so far
};

// Which extended attributes packing stores (as SCHILY.xattr.* pax records): none (the default of
// `pack`), user.* only (what `unmount --save` keeps when the entry it builds on had none: they
// are there only because the job set them), or every one `pack --xattrs` stores: user.,
// trusted. and security. (system.* such as POSIX ACLs are never stored).
enum class XattrSet { kNone, kUser, kStored };

struct PackConfig {
  int level = 3;  // zstd level; 3 is zstd's own default: fast, and within a few % of level 9 on trees
  // Target uncompressed frame size. 4 MiB: +3.6 % size over one frame on text-heavy trees
  // (docs/archive-format.md), while a random 4 KiB read decompresses at most ~4 MiB.
  uint64_t frame_size_bytes = 4ull << 20;
  int threads = 0;  // compression workers; 0 = one per online CPU
  XattrSet xattrs = XattrSet::kNone;
  // Archive paths ("root/.npm/a/b", relative to the archive top) written first, in this order,
  // and recorded as the index hot list. Paths that are missing or not regular files are ignored.
  std::vector<std::string> hot_paths;
  std::string tool_version = "lazycache";  // recorded in the index
  // Called from the calling thread after each frame is written (and once at the end).
  std::function<void(const PackProgress&)> progress;
  // Called for entries skipped (sockets, devices, fifos) or changed while being read.
  // Default: print "lazycache: warning: ..." to stderr.
  std::function<void(const std::string&)> warn;
};

struct PackStats {
  uint64_t files = 0, dirs = 0, symlinks = 0, hardlinks = 0, skipped = 0;
  uint64_t file_bytes = 0;          // sum of regular file sizes (hardlinked data counted once)
  uint64_t uncompressed_bytes = 0;  // tar stream length
  uint64_t archive_bytes = 0;       // everything written to the sink
  uint32_t frames = 0;              // data frames
  double seconds = 0;
};

// Writes the archive of `roots` to `sink` and commits it on success. On error nothing is
// committed (the sink discards what it got). Blocking; the sink is used only from the calling
// thread. Errors: kInvalidArgument (bad roots or config), kNotFound / kIo / kPermissionDenied
// (reading the tree; the message names the path), and whatever sink.write()/commit() return.
Result<PackStats> write_archive(const std::vector<PackRoot>& roots, ByteSink& sink, const PackConfig& config);

}  // namespace lazycache::format
