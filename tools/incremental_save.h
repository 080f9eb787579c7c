// SPDX-License-Identifier: MIT
// File: tools/incremental_save.h -- the incremental path of `unmount --save`: pack the merged
// view of writable mounts on top of the entry they were mounted from (format/incremental_writer.h),
// taking unchanged frames from the local chunk cache, else from the store.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/byte_sink.h"
#include "common/status.h"
#include "format/archive_writer.h"
#include "format/incremental_writer.h"
#include "remote/object_store.h"
#include "tools/save_record.h"

namespace lazycache::cli {

struct IncrementalSaveCounts {
  format::IncrementalStats stats;
  uint32_t frames_from_cache = 0;  // base frames found in the local chunk cache
  uint32_t frames_from_store = 0;  // base frames read from the store (merged range reads)
  uint64_t changed_paths = 0;      // non-directory entries in the upper layers
};

// Packs `records` (one group: writable mounts served by one daemon, mounted from one entry of
// `store`) into `sink` and commits it. The base entry is the one the daemon says it mounted;
// the change set is every non-directory entry of the overlays' upper/ directories.
// Errors before anything is written, when the base cannot be used (a miss, a read-only mount,
// the daemon or the base entry gone, a base of another layout, no mounted path found in the
// base): kUnsupported / kNotFound / kPreconditionFailed with the reason; the caller then packs
// the whole view instead. Later errors: those of write_incremental_archive and the sink.
Result<IncrementalSaveCounts> save_incremental(const std::vector<SaveRecord>& records,
                                               std::shared_ptr<remote::ObjectStore> store, ByteSink& sink,
                                               const format::PackConfig& pack);

}  // namespace lazycache::cli
