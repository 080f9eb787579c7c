// SPDX-License-Identifier: MIT
// File: tools/incremental_save.h -- the incremental path of `unmount --save`: pack the merged
// view of writable mounts on top of the entry they were mounted from (format/incremental_writer.h),
// having the store copy unchanged runs of frames where it can, else taking them from the local
// chunk cache or the store.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/byte_sink.h"
#include "common/status.h"
#include "format/archive_writer.h"
#include "format/incremental_writer.h"
#include "remote/object_store.h"
#include "tools/save_record.h"
#include "tools/store_copy_sink.h"

namespace lazycache::cli {

struct IncrementalSaveCounts {
  format::IncrementalStats stats;
  uint32_t frames_from_cache = 0;  // base frames found in the local chunk cache
  uint32_t frames_from_store = 0;  // base frames read from the store (merged range reads)
  uint64_t changed_paths = 0;      // non-directory entries in the upper layers
  // Unchanged runs copied by the store (S3 UploadPartCopy, copy_file_range on a local store):
  // see StoreCopyCounts. Empty `no_store_copy` when the store copied; else why it could not
  // (every reused frame then went through this process).
  StoreCopyCounts store_copy;
  std::string no_store_copy;
  std::string plan;   // which plan was chosen and why (tools/save_chooser.h)
  double base_s = 0;  // finding and opening the base entry (HEAD, index) and listing upper/
};

// Packs `records` (one group: writable mounts served by one daemon, mounted from one entry of
// `store`) as object `object_key` of the store (create-only as `put` says) and publishes it.
// The base entry is the one the daemon says it mounted, pinned to the ETag the mount recorded;
// the change set is every non-directory entry of the overlays' upper/ directories. Each path's
// members are named as the base names the root mounted there (SaveRecord::base_member), so an
// entry saved with relative paths, or restored elsewhere, is built on all the same.
// Unchanged runs of the base are copied by the store where it can (ObjectStore::start_upload),
// else fetched from the chunk cache or the store and uploaded again.
// Errors before anything is written, when the base cannot be used (a miss, a read-only mount,
// the daemon or the base entry gone or replaced, a base of another layout, no mounted path found
// in the base): kUnsupported / kNotFound / kPreconditionFailed with the reason; the caller then
// packs the whole view instead; kCancelled (its message: why) when a full pack costs less
// (tools/save_chooser.h), also before anything is written. Later errors: those of write_incremental_archive and the upload
// (kAlreadyExists for a key that appeared meanwhile).
Result<IncrementalSaveCounts> save_incremental(const std::vector<SaveRecord>& records, std::shared_ptr<remote::ObjectStore> store,
                                               const std::string& object_key, const remote::PutOptions& put,
                                               const format::PackConfig& pack);

// LAZYCACHE_SAVE_CROSSCHECK=1 (the writable tests set it): the tree an incremental save builds
// from the base index and upper/ is compared with a scan of the mounts, and a difference fails
// the save (kInternal, "cross-check: ..."; not a fallback to a full pack, so a test sees it).
bool save_crosscheck_enabled();

// The member name a save gives the path of `r`: the name the mounted entry gave the root mounted
// there (SaveRecord::base_member) when the path ends in it (an index records each root's path,
// which must end in its member name), else the path's own absolute name (tools/cmd_save.cpp's
// rule). "" for the file system root.
std::string member_name(const SaveRecord& r);
// An archive path of the mounted entry (the daemon's access list names files so) as the save of
// `r` names it: under the root mounted at r.path (SaveRecord::base_member) it moves to
// member_name(r); nullopt for a path under no such root (another record's). When the two names
// are the same, or the record predates base_member, every path is kept as it is.
std::optional<std::string> saved_path_of(const SaveRecord& r, const std::string& mounted_path);
// The roots of a save of `records`, named by member_name().
std::vector<format::PackRoot> save_roots(const std::vector<SaveRecord>& records);

}  // namespace lazycache::cli
