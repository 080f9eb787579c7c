// SPDX-License-Identifier: MIT
// File: format/sparse_write.h -- pwrite_sparse(): file data written at an offset with runs of
// zeros left as holes, so big sparse files (VM images, caches) stay sparse on disk.
// Used by extract_archive() for whole files, and for the pieces of a file split over the file
// writers (format/extractor.cpp), which write disjoint ranges of one descriptor concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"

namespace lazycache::format {

// The probe unit: a chunk of this many bytes that is all zeros is skipped (not written).
inline constexpr size_t kZeroProbeBytes = 64 * 1024;

// Writes `n` bytes of `data` at `offset` of `fd`, one pwrite per run of chunks holding data, skipping every all-zero chunk of
// kZeroProbeBytes (aligned to `data`). `end_written` becomes the end of the last chunk written
// (left unchanged when everything was zeros): a file whose last bytes were a hole needs an
// ftruncate to its size. Thread-safe for disjoint ranges of one descriptor. Errors: kIo (and
// the errno's code) naming `what`, which is called only on failure (the extractor's names are
// paths built from the index: one per file written was 1 % of a full restore's CPU).
Status pwrite_sparse(int fd, const char* data, size_t n, uint64_t offset, uint64_t& end_written, const std::function<std::string()>& what);
inline Status pwrite_sparse(int fd, const char* data, size_t n, uint64_t offset, uint64_t& end_written, const std::string& what) {
  return pwrite_sparse(fd, data, n, offset, end_written, std::function<std::string()>([&what] { return what; }));
}

}  // namespace lazycache::format
