// SPDX-License-Identifier: MIT
// File: format/extractor.h -- extract_archive(): an archive (any ByteSource) -> files on disk.
//
// Design: driven by the index, not by re-parsing the tar stream. Directories, then file data in
// tar-stream order, then hardlinks, symlinks and finally directory modes/mtimes (deepest first).
// File data flows through a pipeline (format/frame_pipeline.h): `concurrency` fetch threads read
// parts of up to `part_size_bytes` of adjacent frames, one ranged read each, all in flight from the
// first byte; each part is checked as it arrives (XXH3-128 of the compressed bytes, once) and
// `threads` workers decompress its frames, and the calling thread takes them in order. In a staged
// target (below) each file that lies whole in one frame is handed to one of `writers` file-writer
// threads (format/file_writer_pool.h), which create, write, set the metadata of and close it; a
// file spanning frames is created by the calling thread, which hashes its pieces in order and
// hands each frame's piece to a writer (pwrite at its offset), the last one to finish setting its
// metadata; every file of a target that already existed is written by the calling thread. The
// directories of a staged target are made from the index by a thread of their own
// (format/dirs_ahead.h) while the first frames arrive; the calling thread's walk makes any it gets
// to first, so a file's directory exists before the file is handed over. Every writer has
// finished, and the directories thread is joined, before hardlinks, symlinks and directory
// metadata are made. Memory is
// bounded by about `max_inflight_bytes` of compressed plus decoded frames, plus the decoded frames
// the writers still read (3 of the largest, at most a quarter of the budget).
//
// Safety: every path is built from index names, which Index::parse has already checked (no '/',
// no "." or "..", no NUL). Every directory is opened component by component with
// O_NOFOLLOW | O_DIRECTORY relative to the target, so a symlink already on disk (or one this
// archive created) is never followed. The descriptors along the current path are kept
// (format/dir_stack.h, bounded), so a tree thousands of levels deep costs one openat per
// directory, not one per path component. Symlinks are created last, as saved (absolute and
// escaping targets too, like tar), and never followed: no directory walk, open, chmod or utimes
// goes through one. With ExternalSymlinks::kRefuse, a symlink whose target resolves outside the
// target directory is refused before anything is written; the check resolves chains through the
// archive's own symlinks (up -> .., esc -> up/../..), not just the ".." in the link text.
// Integrity: every byte written comes from a frame whose compressed bytes matched the XXH3-128
// digest of the index (format/frame_source.h) and whose decompressed content matched zstd's
// content checksum and the seek table's (format/frame_codec.h); the index itself passed its
// XXH3-64 checksum. Decompression is deterministic, so the decoded frames are the packed tar
// stream bit for bit, and files are cut from it at the index's offsets. The per-file XXH3-128
// content digest is therefore not computed again here (about 3 % of a full restore's CPU on node):
// the mount serves the same bytes by the same offsets without it, and `lazycache verify`
// (format/verify.h) still checks every content digest, which would catch a packer that wrote
// wrong offsets. A hostile archive gains nothing: it sets its content digests as it likes.
// A directory target that does not exist yet is built under a temporary name in its parent
// (".lazycache-tmp.PID.N"), flagged chattr +T meanwhile on ext4 (its subdirectories are spread
// over block groups; cleared before publishing), and renamed into place (RENAME_NOREPLACE) once everything is written:
// inside it files, symlinks and hardlinks are created straight under their final names (nothing
// is visible until the rename), and a dead writer's staged tree is removed by the next extract
// into that parent. Into an existing directory,
// each file is written as an unnamed O_TMPFILE in its directory and linked under its final name
// once written whole (a file that already exists: linked under a temporary name,
// then renamed over it: the directory's listing, read once for the sweep below, says which names
// are taken); where O_TMPFILE is unsupported, a named temporary
// (".lazycache-tmp.PID.N") is renamed instead, and temporaries of dead writers (a kill -9) are
// removed from the directories extract writes. A failed extract removes the names it created
// (files, symlinks and whole directories it made): nothing half-restored stays under a final name.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "format/archive.h"

namespace lazycache::format {

class ArchiveHead;

// Extract the subtree of `entry` so that it becomes `dest_path` (for the archive top, root(),
// dest_path is the directory that receives the top-level members).
struct ExtractTarget {
  EntryId entry = 0;
  std::string dest_path;
};

struct ExtractProgress {
  uint64_t files_done = 0, files_total = 0;
  uint64_t bytes_done = 0, bytes_total = 0;  // file bytes
};

struct ExtractConfig {
  std::vector<ExtractTarget> targets;  // see targets_under() and targets_at_original_paths()
  // Archive paths (relative to the archive top) to restrict to; empty = everything under the
  // targets. Ancestors of a selected path are created if missing, without changing their metadata.
  std::vector<std::string> only_paths;
  int threads = 0;  // decode workers; 0 = one per online CPU
  // File writers for staged targets (format/file_writer_pool.h); 0 = auto (2 per online CPU,
  // 2..8: their time is mostly in the kernel creating inodes, partly waiting for its blocks);
  // 1 = the calling thread writes every file.
  int writers = 0;
  // Range reads: simultaneous reads and compressed bytes per read; 0 = auto (choose_fetch_plan()
  // in format/frame_pipeline.h: 8 reads, parts sized to the budget and the archive).
  int concurrency = 0;
  uint64_t part_size_bytes = 0;
  uint64_t max_inflight_bytes = 256ull << 20;  // compressed + decoded bytes held at once
  // Symlinks whose target is absolute or resolves outside the target directory.
  enum class ExternalSymlinks { kCreate, kRefuse };
  ExternalSymlinks external_symlinks = ExternalSymlinks::kCreate;  // kCreate: like tar; never followed
  bool restore_owner = false;                                      // chown to the archived uid/gid (needs root)
  bool restore_xattrs = true;                                      // xattrs present in the index, filtered as below
  // fnmatch(3) patterns of xattr names restored besides user.* (like tar's --xattrs-include).
  // security.* (file capabilities) and trusted.* are restored only when named here: an archive
  // must not grant capabilities because root extracted it.
  std::vector<std::string> xattrs_include;
  // Files as unnamed O_TMPFILEs linked into place (see above); false: named temporaries renamed
  // into place, the fallback used anyway where O_TMPFILE or /proc/self/fd is missing.
  bool unnamed_temporaries = true;
  // New (staged) targets: a thread makes their directories from the index while the first
  // frames are on their way (format/dirs_ahead.h); false: the write walk makes each one.
  bool dirs_ahead = true;
  // The archive's first bytes, already on their way (format/archive_head.h): `restore` starts
  // reading them before the archive is opened. Optional.
  std::shared_ptr<const ArchiveHead> head;
  std::function<void(const ExtractProgress&)> progress;  // from the calling thread
  std::function<void(const std::string&)> warn;          // default: stderr
};

struct ExtractStats {
  uint64_t files = 0, dirs = 0, symlinks = 0, hardlinks = 0;
  uint64_t file_bytes = 0;
  uint64_t compressed_bytes_read = 0;
  uint32_t frames_read = 0;
  uint32_t parts = 0;   // range reads of frame data (one request each from a store)
  int concurrency = 0;  // the read plan used (explicit or auto)
  uint64_t part_size_bytes = 0;
  uint64_t stale_temporaries = 0;  // ".lazycache-tmp.PID.N" of dead writers removed
  uint64_t files_by_writers = 0;   // of `files`, written by the file writers (not the calling thread)
  uint64_t dir_opens = 0;          // directory openat calls of the walks (linear in the entries, any depth)
  uint64_t dirs_ahead = 0;         // directories the directories-ahead thread made (or found made)
  // When the first and the last part of frame data were in and checked (unset: no frame data).
  std::chrono::steady_clock::time_point first_data, last_data;
  double seconds = 0;
};

// One target: the whole archive under `dir` (what `extract -C DIR` does).
std::vector<ExtractTarget> targets_under(const Index& index, const std::string& dir);
// One target per root, at the absolute path it was packed from (what `restore` does).
std::vector<ExtractTarget> targets_at_original_paths(const Index& index);

// Blocking. Existing files are replaced (rename over them); existing directories are reused;
// an existing non-directory where a directory is needed is an error.
// Errors: kInvalidArgument (bad config, unknown only_paths), kCorrupt (a frame fails its digest;
// the message names the frame), kPermissionDenied (a refused symlink, or an existing
// symlink or file where a directory goes: the message names the entry), kIo, and the source's
// errors. On error, the names this call created are removed again (see above).
Result<ExtractStats> extract_archive(const ArchiveReader& reader, const ExtractConfig& config);

}  // namespace lazycache::format
