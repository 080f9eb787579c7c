// SPDX-License-Identifier: MIT
// File: format/archive_head.h -- ArchiveHead: the first bytes of an archive, read while the
// archive is still being opened, for an extract that will read every frame.
//
// Why: opening an archive reads its tail (seek table and index: one range read, two when the
// index is large) and only then does the extract know its frames and start reading them. On a
// link with a 60 ms round trip that is 120-180 ms before the first frame is on its way, while the
// frames of a full extract start at byte 0 whatever the index says. An ArchiveHead started right
// after the object's size is known reads the archive's last `tail` bytes (tail_plan(): enough for
// the index of most trees in one read) and a first wave of parts from byte 0 (plan(): the ramp of
// format/frame_pipeline.h's auto plan) concurrently, on connections of its own; ArchiveReader::open
// reads its tail through reader_source(), and the pipeline copies the parts it covers from here
// instead of reading them (FramePipeline takes it through ExtractConfig::head). Every byte still
// goes through the frame digests and the index checks.
// Why the tail goes first and the auto wave is short: nothing can be written before the index is
// in, and the reads sent together share the link and the store's CPU (the test Swift handles
// requests one after another, about 16 ms each): behind a wave of 8 the tail of the node archive
// (929 KB, two reads at 256 KiB) came in 330 ms after the lookup on the emulated hosted link.
//
// Threads: one per piece (the tail's first), all started by the constructor; the destructor joins
// them (a read in flight finishes first). Thread-safe.
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

class ArchiveHead : public std::enable_shared_from_this<ArchiveHead> {
 public:
  // Pure: the pieces (sizes, in order from byte 0) for an archive object of `object_bytes`: the
  // first reads of the auto read plan (choose_fetch_plan() with the compressed bytes taken as the
  // object's, 4 MiB frames), kAutoWaveReads of them, over at most object_bytes minus
  // tail_plan(object_bytes). Explicit concurrency or part size (> 0) are honoured (a whole wave
  // of `concurrency` reads). Empty when the archive is too small for it to matter (under two
  // minimal tails).
  static std::vector<uint64_t> plan(uint64_t object_bytes, uint64_t budget_bytes, int concurrency, uint64_t part_bytes);
  // Pure: how many of the archive's last bytes to read with the head: a 24th of it, at least the
  // 256 KiB ArchiveReader::open reads anyway, at most 2 MiB (and the object). Why a 24th: the
  // index of a tree of small files is the largest share of its archive (node_modules: 929 KB of
  // 32.8 MB, 2.8 %), so one read holds it; the bytes before the index are frames, which the
  // pipeline takes from here rather than reading them again.
  static uint64_t tail_plan(uint64_t object_bytes);
  // Reads of the auto first wave: the tail plus these go out together (see "Why" above).
  static constexpr size_t kAutoWaveReads = 3;

  // `tail_bytes` (0: none) of the end of the object are read too, first.
  ArchiveHead(std::shared_ptr<const ByteSource> source, const std::vector<uint64_t>& pieces, uint64_t tail_bytes = 0);
  ~ArchiveHead();
  ArchiveHead(const ArchiveHead&) = delete;
  ArchiveHead& operator=(const ArchiveHead&) = delete;

  // Bytes [0, length()) are (being) read here, and [tail_offset(), size of the object).
  uint64_t length() const { return length_; }
  uint64_t tail_offset() const { return tail_offset_; }
  // Copies bytes [offset, offset + out.size()) (within [0, length()) or within the tail) into
  // `out`, blocking until the pieces holding them are in. Errors: a failed or short read of one
  // of those pieces (the source's error, with the range), kInvalidArgument outside both.
  Status copy(uint64_t offset, std::span<std::byte> out) const;
  // A ByteSource over the same object that serves what the head holds from here (blocking until
  // it is in) and reads the rest from the source: what ArchiveReader::open and the pipeline read
  // through. Keeps this head alive (so it must be owned by a shared_ptr).
  std::shared_ptr<const ByteSource> reader_source() const;
  // Range reads sent (figures for the extract's stats).
  size_t pieces() const { return states_.size(); }

 private:
  struct Piece {
    uint64_t offset = 0, length = 0;
    std::string bytes;  // written only by the piece's own thread, read once `done`
    bool done = false;  // guarded by mu_
    Status status;      // guarded by mu_
  };
  void read_piece(size_t i);

  const std::shared_ptr<const ByteSource> source_;
  uint64_t length_ = 0;       // the front: [0, length_)
  uint64_t tail_offset_ = 0;  // the tail: [tail_offset_, size); size when there is none
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<Piece> states_;          // sized once by the constructor (threads hold their index)
  std::vector<std::jthread> threads_;  // last: joined first on destruction
};

}  // namespace lazycache::format
