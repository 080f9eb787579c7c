// SPDX-License-Identifier: MIT
// File: format/incremental_writer.h -- write_incremental_archive(): a new archive of a tree that
// is mostly an earlier archive (the "base"), copying the base's compressed frames whose members
// did not change instead of reading and recompressing them.
//
// The output is a complete archive in the same format as write_archive (seekable zstd + pax tar
// + index), readable by `zstd -d | tar -x` and by lazycache, and it holds exactly the tree found
// under `roots` (scanned as write_archive scans it).
//
// Why copying frames keeps the stream valid: each zstd frame is independent, and a tar member
// does not know where it sits in the stream (no offsets in headers; every member is a multiple
// of 512 bytes). So a run of base frames that starts and ends on member boundaries decodes to
// the same complete members wherever it is placed. The writer therefore reuses a *unit*: the
// shortest run of base frames that starts and ends on member boundaries (a big file cut over
// several frames is one unit), only if
//   - every member in it is still in the tree with the same tar header bytes (path, type, mode,
//     owner, mtime, size, link target, xattrs: compared by regenerating both headers), and its
//     path is not in `changed` (content may differ);
//   - those members come consecutively, in the same order, in the new member order (so a
//     hardlink member still follows its target: its header names the target, and the target
//     is earlier in the new order by construction);
//   - it does not hold the end-of-archive blocks (the base's last unit is always rewritten).
// Everything else is packed fresh from the tree, cut into frames with write_archive's rule, and
// a fresh frame is closed before each reused unit.
//
// Member order (and the learned hot list, PackConfig::hot_paths):
//  - a learned list whose files differ from the base's hot list by more than 10 % (compared as
//    sets, so jobs whose parallel steps read in a slightly different order each run do not pay
//    a relayout every save) is laid out first, in the learned order, then everything else depth-first with children
//    sorted bytewise (as write_archive). This is what makes the next mount fast: its prefetch
//    reads the job's files in a few large range reads. It costs recompressing the learned files
//    and the frames they are taken out of, once; the next save with the same learned list
//    reuses the layout.
//  - otherwise (no learned list, or the base's own): the base's physical hot region, minus
//    files that are gone, minus changed files no longer learned; then learned files that are new
//    or changed; then everything else depth-first. The index hot list is that region followed
//    by the rest of the learned list.
//
// The base layout is not stored: it is rebuilt from the base index (hot prefix, then the
// depth-first walk, regenerating headers) and checked against every regular file's data offset,
// the frame table and the stream length. Any mismatch gives kUnsupported before anything is
// written, so the caller can fall back to write_archive.
//
// Deterministic: the same tree, base, `changed` and config give the same bytes.
// Blocking. Fresh frames are compressed on the calling thread (they are the small part);
// base frames are fetched on one helper thread, one run ahead, while the writer works.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/byte_sink.h"
#include "common/status.h"
#include "format/archive.h"
#include "format/archive_writer.h"

namespace lazycache::format {

struct IncrementalBase {
  std::shared_ptr<const Index> index;
  // The compressed bytes of base frames [first, last], concatenated. Called from one helper
  // thread, runs in increasing order, never overlapping; at most 32 MiB per call unless one frame is bigger; one call runs ahead of the writer. The
  // writer checks each frame's XXH3-128 digest before using any byte (kCorrupt otherwise).
  std::function<Result<std::string>(uint32_t first, uint32_t last)> fetch_frames;
};

struct IncrementalStats {
  PackStats pack;                          // as write_archive reports it
  uint32_t frames_reused = 0;              // base frames copied verbatim
  uint32_t frames_compressed = 0;          // frames compressed here
  uint64_t bytes_reused = 0;               // uncompressed tar bytes inside reused frames
  uint64_t bytes_compressed = 0;           // uncompressed tar bytes compressed here
  uint64_t file_bytes_compressed = 0;      // file content bytes read from the tree and compressed
  uint64_t files_compressed = 0;           // regular file members packed fresh
  uint64_t compressed_bytes_fetched = 0;   // base frame bytes obtained through fetch_frames
  uint64_t members_superseded = 0;         // members left dead in reused frames by this save
  uint64_t dead_bytes = 0;                 // tar bytes of dead members in the new archive
  uint32_t fetch_calls = 0;
};

// Writes the archive of `roots` to `sink`, reusing frames of `base`, and commits it.
// `changed`: archive paths ("root/.npm/a", as Index::path) whose content may differ from the
// base although their header does not (files rewritten in place); their members are never
// taken from the base. New, deleted and metadata-changed entries are found by the scan.
// config.threads is unused (see above); every other field means what it means to write_archive.
// Errors: kUnsupported (the base layout is not one this writer recognises: nothing written),
// kCorrupt (a fetched base frame fails its digest), fetch_frames' errors, and write_archive's.
// On error nothing is committed.
Result<IncrementalStats> write_incremental_archive(const std::vector<PackRoot>& roots, const IncrementalBase& base,
                                                   const std::set<std::string>& changed, ByteSink& sink,
                                                   const PackConfig& config);

}  // namespace lazycache::format
