// SPDX-License-Identifier: MIT
// File: format/archive_tail.h -- the end of every archive we write: totals, the index frame and
// the seek table, then commit. Shared by write_archive and write_incremental_archive so both
// finish an archive byte for byte the same way.
#pragma once

#include <cstdint>

#include "common/byte_sink.h"
#include "common/status.h"
#include "format/index_builder.h"

namespace lazycache::format {

// `model` has its nodes, roots, hot list, tool version and data frames (contiguous, in stream
// order) filled; this fills model.totals from them, writes the index frame and the seek table to
// `sink` and commits it. Returns the bytes written here (index frame + seek table).
// Errors: kInvalidArgument (the index does not fit its u32 fields), the sink's.
// `commit_seconds`, when given, gets the time sink.commit() took (the rest is the index's).
Result<uint64_t> finish_archive(IndexModel& model, ByteSink& sink, int level, double* commit_seconds = nullptr);

}  // namespace lazycache::format
