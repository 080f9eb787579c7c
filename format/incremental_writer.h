// SPDX-License-Identifier: MIT
// File: format/incremental_writer.h -- write_incremental_archive(): a new archive of a tree that
// is mostly an earlier archive (the "base"), copying the base's compressed frames whose members
// did not change instead of reading and recompressing them.
//
// The output is a complete archive in the same format as write_archive (seekable zstd + pax tar
// + index), readable by `zstd -d | tar -x` and by lazycache, and it holds exactly the tree found
// under `roots` (scanned as write_archive scans it).
//
// Why copying frames keeps the stream valid, and the stream order: docs/archive-format.md,
// "Frames copied from an earlier archive". In short: the writer copies *units* (the shortest
// runs of base frames that start and end on member boundaries; the last unit, holding the
// end-of-archive blocks, is always rewritten). A member of a copied unit whose file changed
// stays as a dead member (the index lists it; `tar -x` replaces it with the file's new member
// written later) as long as it is a single-link file, a directory or a symlink and at most a
// quarter of the unit ends up dead; otherwise the unit's members are packed fresh in its place.
// Every dead member keeps a live member later in the stream (a deleted file's unit is packed
// again). Order: base units in base order, then at the end a newly learned hot list, then new
// and changed members depth-first, then the directories stock tars need again (dir_repeats.h).
// A unit holding a directory whose header changed is packed again (bsdtar restores the metadata
// of a directory's first member). Runs of copied units may be appended by the caller's store
// (copy_to_sink) instead of being fetched; a chooser (choose) may turn the save into a full pack.
//
// Learned layout (PackConfig::hot_paths): a learned list whose files differ from the base's hot
// list by more than 10 % (compared as sets, so jobs whose parallel steps read in a slightly
// different order each run do not pay a relayout every save) is moved together to the end, in
// the learned order (their old members become dead), and becomes the index hot list; the next
// mount prefetches that region in a few large range reads. Otherwise the base's hot list is
// kept, followed by learned files it lacks.
//
// The base layout comes from the base index's member offsets (version 2); for a version 1
// base it is rebuilt by replaying write_archive's order (hot prefix, then depth-first). Either
// way it is checked against every regular file's data offset, the frame table and the stream
// length; a mismatch gives kUnsupported before anything is written, so the caller can fall
// back to write_archive.
//
// Deterministic: the same tree, base, `changed` and config give the same bytes.
// Blocking. Fresh frames are compressed on the calling thread (they are the small part);
// base frames are fetched on one helper thread, one run ahead, while the writer works.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/byte_sink.h"
#include "common/status.h"
#include "format/archive.h"
#include "format/archive_writer.h"
#include "format/tree_scan.h"

namespace lazycache::format {

// What one way of writing the new archive costs, counted before anything is written.
struct IncrementalPlanSizes {
  uint64_t fresh_tar_bytes = 0;          // tar bytes to compress here (headers approximated as 512 bytes)
  uint64_t fresh_file_bytes = 0;         // of those, file content read from the tree
  uint64_t fresh_files = 0;              // regular files read from the tree
  uint64_t reused_compressed_bytes = 0;  // base frames kept
  uint64_t copied_compressed_bytes = 0;  // of those, appended through copy_to_sink
};

// The sizes a chooser compares: keeping the base's layout ("reuse"), laying out the files the job
// read anew ("relayout", only when the learned order is new: PackConfig::hot_paths), and a full
// pack of the same tree.
struct IncrementalEstimate {
  IncrementalPlanSizes reuse;
  std::optional<IncrementalPlanSizes> relayout;
  uint64_t tree_tar_bytes = 0;         // a full pack's tar stream (headers approximated)
  uint64_t tree_files = 0;             // regular files a full pack reads
  uint64_t base_compressed_bytes = 0;  // the base's frames
};

enum class IncrementalChoice { kReuse, kRelayout, kFullPack };

struct IncrementalBase {
  std::shared_ptr<const Index> index;
  // The compressed bytes of base frames [first, last], concatenated. Called from one helper
  // thread, runs in increasing order, never overlapping; at most 32 MiB per call unless one frame is bigger; one call runs ahead of the writer. The
  // writer checks each frame's XXH3-128 digest before using any byte (kCorrupt otherwise).
  std::function<Result<std::string>(uint32_t first, uint32_t last)> fetch_frames;
  // Optional: appends the base's compressed bytes [offset, offset + length) to the sink without
  // handing them to the writer (a copy made by the store the sink uploads to). Runs of reused
  // frames adjacent in both archives and holding at least copy_min_bytes go this way, the rest
  // through fetch_frames. No digest check is possible: the caller pins the copy to the base
  // object it read the index from (its ETag), so the bytes are those the index describes.
  std::function<Status(uint64_t offset, uint64_t length)> copy_to_sink;
  uint64_t copy_min_bytes = 0;
  // Optional: decides between the plans before anything is written (without it: relayout when
  // the learned order is new, else reuse). kRelayout without a relayout plan means kReuse;
  // kFullPack makes write_incremental_archive return kCancelled, nothing written or committed.
  std::function<IncrementalChoice(const IncrementalEstimate&)> choose;
  // Optional: the tree of `roots` exactly as scan_for_pack would find it, built without walking
  // them (the merged view of writable mounts, from this base's index and their upper layers:
  // fs/overlay_tree.h). Files are still read through the roots. Without it the roots are scanned.
  std::function<Result<ScannedTree>()> tree;
};

// Where the time of write_incremental_archive went, in seconds (for the save line).
struct IncrementalPhases {
  double tree_s = 0;    // the base layout and the new tree (IncrementalBase::tree, or the scan)
  double plan_s = 0;    // matching the tree to the base, the plans and the chooser
  double frames_s = 0;  // the data frames: copies by the store, fetched frames, fresh ones compressed
  double index_s = 0;   // the index and seek table built, compressed and written
  double commit_s = 0;  // ByteSink::commit (the upload's last part and its completion)
};

struct IncrementalStats {
  PackStats pack;  // as write_archive reports it
  IncrementalPhases phases;
  uint32_t frames_reused = 0;             // base frames copied verbatim
  uint32_t frames_compressed = 0;         // frames compressed here
  uint64_t bytes_reused = 0;              // uncompressed tar bytes inside reused frames
  uint64_t bytes_compressed = 0;          // uncompressed tar bytes compressed here
  uint64_t file_bytes_compressed = 0;     // file content bytes read from the tree and compressed
  uint64_t files_compressed = 0;          // regular file members packed fresh
  uint64_t compressed_bytes_fetched = 0;  // base frame bytes obtained through fetch_frames
  uint32_t frames_copied = 0;             // of frames_reused, appended through copy_to_sink
  uint64_t compressed_bytes_copied = 0;   // their compressed bytes
  uint64_t members_superseded = 0;        // members left dead in reused frames by this save
  uint64_t dead_bytes = 0;                // tar bytes of dead members in the new archive
  uint32_t fetch_calls = 0;
  IncrementalChoice choice = IncrementalChoice::kReuse;  // the plan written (kReuse or kRelayout)
};

// Writes the archive of `roots` to `sink`, reusing frames of `base`, and commits it.
// `changed`: archive paths ("root/.npm/a", as Index::path) whose content may differ from the
// base although their header does not (files rewritten in place); their members are never
// taken from the base. New, deleted and metadata-changed entries are found by the scan.
// config.threads is unused (see above); every other field means what it means to write_archive.
// Errors: kUnsupported (the base layout is not one this writer recognises: nothing written),
// kCancelled (base.choose chose a full pack: nothing written),
// kCorrupt (a fetched base frame fails its digest), fetch_frames' errors, and write_archive's.
// On error nothing is committed.
Result<IncrementalStats> write_incremental_archive(const std::vector<PackRoot>& roots, const IncrementalBase& base,
                                                   const std::set<std::string>& changed, ByteSink& sink, const PackConfig& config);

}  // namespace lazycache::format
