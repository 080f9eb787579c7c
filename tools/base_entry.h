// SPDX-License-Identifier: MIT
// File: tools/base_entry.h -- opening the entry an incremental save builds on (the one a
// writable mount served), in as few round trips as the save record allows.
//
// Why: before this, the save sent a HEAD (is the entry still the version mounted?), then read
// the archive's tail in one or two ranged GETs (the node fixture's index is larger than the
// first 256 KiB read), all in series before anything else could start: three round trips on a
// remote store. `mount` knows the entry's size, ETag and tail length, and records them
// (SaveRecord::base_size/base_tail), so the save reads the whole tail in one GET pinned to the
// ETag: a replaced entry answers 412 (kPreconditionFailed), a deleted one 404, exactly what the
// HEAD told.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/byte_source.h"
#include "common/status.h"
#include "format/archive.h"
#include "remote/object_store.h"
#include "tools/save_record.h"

namespace lazycache::cli {

// The bytes after the last data frame of an archive of `object_bytes` with `index` (index frame
// and seek table): what SaveRecord::base_tail records. Pure.
uint64_t base_tail_bytes(const format::Index& index, uint64_t object_bytes);
// What the save reads of the end of the base to open it: its tail, and at least the 256 KiB
// ArchiveReader::open reads first, within the object. Pure.
uint64_t base_tail_read_length(uint64_t base_size, uint64_t base_tail);

// The copy of the base's tail that mount keeps for the save: `state_dir`/base-tail. Mount read
// those bytes with its lookup, pinned to the entry's ETag, so keeping them costs no request and
// spares the save the ranged GET of the tail, the round trip before anything else of an
// incremental save can start (the copies in the store wait for the base's frame table).
std::string base_tail_copy_path(const std::string& state_dir);
// Writes `tail` there (mode 0600, temp name and rename) and returns its digest for
// SaveRecord::base_tail_digest.
Result<std::string> keep_base_tail_copy(const std::string& state_dir, std::string_view tail);

struct BaseEntry {
  remote::ObjectInfo object;                 // the entry's object, pinned to the mounted ETag
  std::shared_ptr<const ByteSource> source;  // ranged reads of it (pinned), for its frames
  std::unique_ptr<format::ArchiveReader> reader;
  // The tail came from mount's copy: nothing asked the store yet whether the entry is still the
  // one mounted. Every read and copy of it is pinned to the ETag and the commit checks it once
  // more, so a replaced base fails the save with kPreconditionFailed later instead of here.
  bool tail_from_mount = false;
};

// Opens object `object_key` as recorded in `r` (base_etag, base_size, base_tail). With all
// three: the tail from mount's copy when the record names one (base_tail_digest) and the file
// holds exactly those bytes, else one ranged GET of it, pinned to the ETag. Else (records
// written before base_size) a HEAD, the ETag compared, then ArchiveReader::open on the store.
// Errors: kPreconditionFailed (the entry was replaced after it was mounted), kNotFound, the
// store's and ArchiveReader::open's, with the object named.
Result<BaseEntry> open_base_entry(std::shared_ptr<remote::ObjectStore> store, const std::string& object_key, const SaveRecord& r);

}  // namespace lazycache::cli
