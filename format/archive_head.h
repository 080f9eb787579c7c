// SPDX-License-Identifier: MIT
// File: format/archive_head.h -- ArchiveHead: the first bytes of an archive, read while the
// archive is still being opened, for an extract that will read every frame.
//
// Why: opening an archive reads its tail (seek table and index: one range read, two when the
// index is large) and only then does the extract know its frames and start reading them. On a
// link with a 60 ms round trip that is 120-180 ms before the first frame is on its way, while the
// frames of a full extract start at byte 0 whatever the index says. An ArchiveHead started right
// after the object's size is known reads the first wave of parts (the ramp of
// format/frame_pipeline.h's auto plan) concurrently with the tail, on connections of its own;
// the pipeline then copies the parts it covers from here instead of reading them (FramePipeline
// takes it through ExtractConfig::head). Every byte still goes through the frame digests, and a
// part the head cannot give (a failed piece) is read by the pipeline itself. restore also starts
// one beside an exact key's lookup, before the object's size is known (tools/early_head.h).
//
// Threads: one per piece, all started by the constructor; the destructor joins them (a read in
// flight finishes first). Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/byte_source.h"
#include "common/status.h"

namespace lazycache::format {

class ArchiveHead {
 public:
  // Pure: the pieces (sizes, in order from byte 0) for an archive object of `object_bytes`: the
  // first wave of the auto read plan (choose_fetch_plan() with the compressed bytes taken as the
  // object's, 4 MiB frames), over at most object_bytes minus the 256 KiB tail that opening reads
  // anyway. Explicit concurrency or part size (> 0) are honoured. Empty when the archive is
  // too small for it to matter (under two tails).
  static std::vector<uint64_t> plan(uint64_t object_bytes, uint64_t budget_bytes, int concurrency, uint64_t part_bytes);

  ArchiveHead(std::shared_ptr<const ByteSource> source, const std::vector<uint64_t>& pieces);
  // A head whose bytes are already in hand: the archive's first `bytes.size()` bytes (restore's
  // lookup of an archive no larger than its one read, kEntryTailBytes, holds all of it: the
  // frames are copied from here instead of read a second time). No thread, no read.
  explicit ArchiveHead(std::string bytes);
  ~ArchiveHead();
  ArchiveHead(const ArchiveHead&) = delete;
  ArchiveHead& operator=(const ArchiveHead&) = delete;

  // Bytes [0, length()) are (being) read here.
  uint64_t length() const { return length_; }
  // Copies bytes [offset, offset + out.size()) (within length()) into `out`, blocking until the
  // pieces holding them are in. Errors: a failed read of one of those pieces (the source's error,
  // with the range), kCorrupt for bytes past a short read's end (a piece reaching past the
  // object's end keeps what it read), kInvalidArgument outside [0, length()). The pipeline reads
  // what a failed copy would have given from the source itself.
  Status copy(uint64_t offset, std::span<std::byte> out) const;
  // Range reads sent (figures for the extract's stats; one for a head of bytes in hand).
  size_t pieces() const { return states_.size(); }

 private:
  struct Piece {
    uint64_t offset = 0, length = 0;
    uint64_t got = 0;   // bytes read from `offset` (fewer than `length` past the object's end); guarded by mu_
    bool done = false;  // guarded by mu_
    Status status;      // guarded by mu_
  };
  void read_piece(size_t i);

  const std::shared_ptr<const ByteSource> source_;
  uint64_t length_ = 0;
  // [0, length_): each piece's thread writes only its own range. Left uninitialised (new char[],
  // not a std::string's resize): zero-filling the 16 MiB of node's head page-faulted every page
  // on the calling thread, 74 ms before the first piece or the lookup was even sent (strace of a
  // restore over the hosted link); untouched, the pages fault in as the pieces' bytes arrive.
  // A byte is read only below its piece's `got` (copy() checks).
  std::unique_ptr<char[]> buffer_;
  std::string kept_;       // the bytes of the ArchiveHead(std::string) constructor
  char* bytes_ = nullptr;  // buffer_ or kept_'s
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<Piece> states_;
  std::vector<std::jthread> threads_;  // last: joined first on destruction
};

}  // namespace lazycache::format
