// SPDX-License-Identifier: MIT
// File: fs/frame_fetcher.h -- FrameFetcher: turns "I need frame N" into verified decompressed
// bytes, through the data path
//   in-memory FrameCache -> LMDB ChunkCache -> range reads of the archive's ByteSource.
//
// Design:
//  - One fetch per frame in flight: every request for a frame that is already queued or being
//    fetched joins its waiter list (single flight); a waiter's priority raises the queued frame's.
//  - A priority queue (on-demand < readahead < prefetch < background, FIFO within a priority).
//    Workers always take the most urgent frame; prefetch and background work may occupy at most
//    `background_threads` workers, so on-demand reads always find a free worker, and at most
//    `background_threads_while_reading` while a read's own fetch is in flight, so that the fill
//    does not take a shared link's rate from it. The fill follows the reader: an on-demand fetch
//    moves the fill's queued frames just after it to the front (`fill_follow_frames`).
//  - A worker that takes frame N also takes the queued frames of the same priority adjacent to
//    it (N+1, N+2, ..., N-1, ...) up to `merge_bytes` of compressed data (`merge_bytes_on_demand`
//    for on-demand frames), looks each up in the chunk cache, and reads the missing ones with one
//    range read per contiguous run. The read streams: a frame someone waits for (or keeps in
//    memory) is checked, decoded and handed on as soon as its bytes are in, on the worker, while
//    the rest of the run arrives (format::FrameSource::read_run's `ready`).
//  - Every frame is verified by FrameBuffers::decode (XXH3-128 of the compressed bytes against
//    FrameInfo::digest, then decompression into a recycled buffer and the seek-table checksum,
//    fs/frame_buffers.h) before it is
//    stored in the chunk cache, kept in memory or handed to a waiter. A chunk-cache copy that fails
//    verification is dropped and refetched, counted (chunk_cache_bad) and logged, one line per
//    copy, at most 10 a minute.
//  - Buffers (compressed bytes in flight, decompressed frames) are charged to the MemoryBudget;
//    on-demand fetches shrink the FrameCache to make room (and go past the limit if they must).
//    Readahead, and prefetch and background work, may shrink it too, but each only while its own
//    buffers in flight stay within `fill_memory_bytes`; past that they wait (a small budget full
//    of the job's frames must not stall the fill, and neither may take the budget from reads).
//  - Readahead with a chunk cache (issue 15, memory): a readahead frame nobody waits for yet is
//    stored in the chunk cache undecoded, like a fill frame, and decoded into memory only when
//    the frames held ahead stay within `ahead_memory_bytes` (keep_if_room); those are evicted
//    only after every frame already read (FrameCache's ahead class). The reader that gets past
//    them decodes the rest from the chunk cache (the blob is in the page cache). So memory holds
//    the frames being read and the next few, not the whole window: readahead frames no longer
//    evict each other before their reader comes (node partial job at a 32 MiB budget: 144
//    decodes of its 50 frames instead of 336).
//  - Background fill (prefetch and background priority, issue 15): a frame nobody waits for and
//    nobody keeps in memory (nor decode_ahead asks for) is only checked against its digest and
//    stored in the chunk cache, not decompressed (the chunk-cache hit that serves it later decodes and verifies it in full): on
//    a 2-core runner the job needs the CPU. A fill fetch that fails fails nobody: readers who
//    joined it are queued again as a fresh on-demand fetch. stop_background() drops every fill
//    frame not yet started (the mount is ending); fill runs already in flight finish.
//  - A frame larger than `spill_over_bytes` (a quarter of the budget, set by Filesystem) would
//    not fit the FrameCache and would be decompressed again for every read: it is fetched alone,
//    decoded once, streaming, into a FrameSpill file, and delivered as that file (issue 13). Its
//    compressed bytes are read in 4 MiB pieces when they too are larger than spill_over_bytes
//    (they then bypass the chunk cache, which holds blobs whole); memory stays at a piece plus
//    zstd's window, whatever the frame size.
//  - A failure of the source (after its own retries and timeouts) fails that fetch's waiters with
//    the source's status and logs one line naming the archive, the frame and the cause; the frame
//    is forgotten, so a later read tries again.
//
// Threads: owns `threads` worker threads, started in the constructor; the destructor stops them,
// joins them and fails every remaining waiter with kCancelled. Callbacks run on a worker thread
// (or inline in get() when the frame is in memory) with no lock held; they must not block long.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "format/archive.h"
#include "fs/chunk_cache.h"
#include "fs/frame_buffers.h"
#include "fs/frame_cache.h"
#include "fs/frame_spill.h"
#include "fs/log_rate_limit.h"
#include "fs/memory_budget.h"

namespace lazycache::fs {

enum class Priority : uint8_t { kOnDemand = 0, kReadahead = 1, kPrefetch = 2, kBackground = 3 };

struct FetcherConfig {
  // 16 range reads in flight: the 16-32 concurrent GETs per mount the anchors converge on; local
  // sources need fewer, but idle workers cost only a stack.
  int threads = 16;
  // Prefetch and background fill use at most this many workers, leaving the rest to reads. 4: two
  // connections already carry a hosted or far link's rate (700 / 100 Mbit/s each), and four hide
  // the round trip between one fill range read and the next.
  int background_threads = 4;
  // While a read's own fetch (on-demand or readahead) is in flight, background work starts no new
  // run past this many in flight: links share their rate between connections, so four fill
  // connections next to one read's took four fifths of a far link (the large fixture's python
  // step: 25 s with the fill against 18 s without). One keeps the link busy beside the read.
  int background_threads_while_reading = 1;
  // The fill follows the reader: an on-demand fetch of frame N moves the queued background frames
  // N+1 .. N+this to the front of the fill, in order (the latest read's first), so the fill's
  // connections bring what a job reading there reads next (a package's other files) instead of
  // the archive's far end. 0: the fill keeps archive order. 16 (64 MiB of a default pack): on
  // the large fixture's job over the far link 8, 16 and 32 did the same within noise.
  uint32_t fill_follow_frames = 16;
  // 4 MiB: large enough that a range read's round trip is small against its transfer on a
  // hosted link, small enough that readahead and prefetch spread over several connections (links
  // cap each connection's bandwidth) and that a reader who catches up with a readahead run does
  // not wait for much more than its frame.
  uint64_t merge_bytes = 4ull << 20;
  // 1 MiB for runs of on-demand frames: a reader waits for the frames before its own in the run
  // (delivered as they arrive since ee382cc; the whole run before that), so it stays about one
  // frame or two at the default frame size (many readers of neighbouring frames still merge).
  // Not measured again since the runs stream.
  uint64_t merge_bytes_on_demand = 1ull << 20;
  // 2 MiB for fill runs (prefetch and background priority): a reader who joins a fill run in
  // flight waits for its frame's bytes (or the run's end, when they had come before it joined),
  // and unmount waits for the runs in flight; 2 MiB is ~25 ms on a hosted link's connection, and
  // still large against its 20 ms round trip.
  uint64_t merge_bytes_background = 2ull << 20;
  // Fill buffers in flight may take at most this much of the memory budget (evicting in-memory
  // frames for it); 0: a quarter of the budget (set by Filesystem).
  uint64_t fill_memory_bytes = 0;
  // Readahead frames decoded into memory before anyone read them may take at most this much of it
  // (evicted last); 0: a quarter of the budget (set by Filesystem). A quarter: the next frame or
  // two of a walk are decoded ahead on a free core, and with the fill's and readahead's quarters
  // in flight a quarter still holds the frames being read (evicting the frame a job is reading
  // costs a decode per file read from it).
  uint64_t ahead_memory_bytes = 0;
  // A fetch still in flight after this long is not joined by new requests: they start a fresh
  // fetch, and the old one's result, whenever it comes, is dropped. A stalled connection can
  // take the store's low-speed timeout (a minute) to fail; meanwhile every read of that frame
  // would time out, even after the store recovered. 10 s: well past a healthy range read.
  uint64_t restart_after_ms = 10000;
  // Frames decompressing to more than this are spilled to files in `spill_dir` (see above);
  // 0: never (every frame is held in memory).
  uint64_t spill_over_bytes = 0;
  std::string spill_dir = "/tmp";
  // Called on the worker thread with every frame freshly decoded into memory, after its waiters
  // got it and with no lock held (Filesystem hands its files to the kernel's page cache). May
  // block briefly; must not wait on a read of the same fetcher. `ahead`: a fill or prefetch frame
  // decoded because decode_ahead asked for it, which no reader waited for.
  std::function<void(uint32_t frame, const FramePtr& bytes, bool ahead)> on_decoded;
  // Decode-ahead (issue 15): asked for each fill or prefetch frame that no reader waits for, on a
  // worker with the fetcher's lock held (so it may only read atomics and other locks' state that
  // never calls back here). True: decode the frame into memory, within the ahead share as a
  // readahead frame, so that on_decoded hands its files to the kernel before the job reads them.
  // Unset or false: the frame is only checked and stored in the chunk cache.
  std::function<bool(uint32_t frame)> decode_ahead;
};

// Live counters (relaxed atomics: figures for people, not synchronisation).
struct FetchCounters {
  std::atomic<uint64_t> store_range_reads{0};
  std::atomic<uint64_t> store_bytes{0};  // compressed bytes read from the source
  std::atomic<uint64_t> frames_from_store{0};
  std::atomic<uint64_t> frames_from_chunk_cache{0};
  std::atomic<uint64_t> frames_from_memory{0};
  std::atomic<uint64_t> chunk_cache_bad{0};  // cached copies that failed verification
  std::atomic<uint64_t> fetch_errors{0};
  std::atomic<uint64_t> prefetched_frames{0};     // frames completed at prefetch/background priority
  std::atomic<uint64_t> fill_bytes{0};            // of store_bytes: read by prefetch/background runs
  std::atomic<uint64_t> fill_retried{0};          // failed fill fetches whose readers were queued again
  std::atomic<uint64_t> fetches_restarted{0};     // stuck fetches replaced (restart_after_ms)
  std::atomic<uint64_t> frames_spilled{0};        // large frames decoded into a FrameSpill file
  std::atomic<uint64_t> readahead_stored{0};      // readahead frames stored in the chunk cache undecoded
  std::atomic<uint64_t> frames_decoded{0};        // decompressions of a whole frame (into memory or a spill file)
  std::atomic<uint64_t> frames_decoded_ahead{0};  // of those: fill or prefetch frames decode_ahead asked for
};

// A delivered frame: its bytes in memory, or (a frame over spill_over_bytes) a file holding
// them. Exactly one is set.
struct FetchedFrame {
  FramePtr bytes;
  SpilledFramePtr spilled;
};
using FrameCallback = std::function<void(Result<FetchedFrame>)>;

class FrameFetcher {
 public:
  // `reader` and the caches must outlive the fetcher. `chunk_cache` may be null (no local cache).
  FrameFetcher(const format::ArchiveReader& reader, std::shared_ptr<ChunkCache> chunk_cache, FrameCache& memory, MemoryBudget& budget,
               FetcherConfig config = {});
  ~FrameFetcher();
  FrameFetcher(const FrameFetcher&) = delete;
  FrameFetcher& operator=(const FrameFetcher&) = delete;

  // Delivers frame `frame` (decompressed, verified) to `cb`: inline when it is in memory, else
  // later from a worker. Errors: kInvalidArgument (no such frame), the source's errors, kCorrupt,
  // kCancelled (fetcher shutting down). Never blocks on I/O.
  void get(uint32_t frame, Priority priority, FrameCallback cb);
  // get() for frames [first, last], queued together so that a worker can fetch the missing ones
  // with one merged range read. `cb` runs once per frame, with its number.
  void get_range(uint32_t first, uint32_t last, Priority priority, std::function<void(uint32_t, Result<FetchedFrame>)> cb);
  // Blocking form of get() (tests, tools).
  Result<FetchedFrame> get_sync(uint32_t frame, Priority priority = Priority::kOnDemand);
  // Queues frames [first, last] that are neither in memory nor already queued (together, so they
  // can be merged). Readahead frames are kept in memory when done; prefetch and background frames
  // only go to the chunk cache. Readahead skips frames the kernel's page cache holds
  // (FrameCache::kernel_holds): the job's reads of them never reach the mount.
  void prefetch(uint32_t first, uint32_t last, Priority priority);
  // Blocks until nothing is queued or in flight (tests and `--prefetch` completion reports).
  void wait_idle();
  bool idle() const;
  // Frames queued or being fetched now, at every priority (a figure for `status`).
  size_t pending() const;
  // Drops every queued prefetch and background frame that no reader waits for, and ignores later
  // prefetch() calls at those priorities. Fill runs in flight finish. Never blocks on I/O.
  void stop_background();

  const FetchCounters& counters() const { return counters_; }
  // Frees the recycled decode buffers (an idle mount); returns their bytes.
  uint64_t trim_buffers() { return buffers_.trim(); }
  uint64_t buffers_kept() const { return buffers_.kept_bytes(); }

 private:
  struct Pending {
    Priority priority;
    uint64_t seq;  // arrival order, and the fetch's identity: complete() ignores a replaced one
    bool claimed = false;
    bool keep_in_memory = false;
    std::vector<FrameCallback> waiters;
    std::chrono::steady_clock::time_point claimed_at{};
    uint8_t corrupt_refetches = 0;  // fresh GETs after bytes that failed their digest (complete())
    uint64_t ahead_reserved = 0;    // bytes of ahead_reserved_ taken by keep_if_room for this fetch
    // Readahead asked for this frame while a fill or prefetch run had it in flight: decode it
    // into memory when it arrives, within the ahead share, as a readahead frame would be. Without
    // this the walk that caught up with the fill found its frames stored undecoded and decoded
    // each on demand, with the reader waiting (cold full read, node, hosted: 2.26 -> 2.72 s).
    bool readahead_asked = false;
    // decode_ahead said yes for this fill or prefetch frame (keep_if_room).
    bool decode_ahead = false;
  };
  using QueueKey = std::tuple<uint8_t, uint64_t, uint32_t>;  // (priority, arrival, frame)

  void enqueue_locked(uint32_t frame, Priority priority, bool keep_in_memory, FrameCallback cb);
  // Moves the queued background frames after `frame` to the front of the fill (fill_follow_frames).
  void fill_follow_locked(uint32_t frame);
  void worker_loop();
  // Takes the most urgent runnable frame plus its queued neighbours; empty if none may run now.
  // `seqs` gets the claimed fetches' identities, in the order of the frames.
  std::vector<uint32_t> claim_run_locked(Priority& priority, std::vector<uint64_t>& seqs);
  void process_run(const std::vector<uint32_t>& frames, const std::vector<uint64_t>& seqs, Priority priority);
  // Delivers the result of fetch `seq` of `frame`; a fetch that was replaced is ignored.
  void complete(uint32_t frame, uint64_t seq, const Result<FetchedFrame>& result);
  // What a run's buffers are charged as: a read's (forced past the limit: reads must progress),
  // or readahead's or the fill's (each within its share of `fill_memory_bytes`, else 0: requeue).
  enum class Charge { kRead, kReadahead, kFill };
  static Charge charge_for(Priority priority);
  uint64_t reserve_for(uint64_t bytes, Charge charge);
  void release_charge(uint64_t bytes, Charge charge);
  // A fill or readahead frame read from the store that no reader waits for and nobody keeps in
  // memory: checks its digest, stores it in the chunk cache and forgets it (kDone); kWanted
  // (nothing done) when it is wanted after all, its digest fails or the chunk cache is off;
  // kStoredButWanted when it was stored and then a reader joined or decode-ahead asked for it
  // (the caller decodes it, without storing it again). `fill`: counted as prefetched.
  enum class Stored { kDone, kWanted, kStoredButWanted };
  Stored store_unwanted(uint32_t frame, uint64_t seq, std::span<const std::byte> compressed, bool fill);
  // A readahead frame (or a fill frame readahead asked for) is decoded into memory only while the
  // frames held ahead (decoded, not read yet) stay within `ahead_memory_bytes`: then marks fetch
  // `seq` of `frame` to be kept and returns true; false for fill frames nobody walks towards. Past that, readahead evicting other readahead before its reader came made a
  // small budget thrash.
  bool keep_if_room(uint32_t frame, uint64_t seq);
  // Queues again, at background priority, the frames keep_if_room turned away for lack of room
  // in the ahead share, as far as the share has room now. Called with mu_ held when a run ends.
  void requeue_deferred_ahead_locked();
  // Whether fetch `seq` of `frame` has readers or is kept in memory; when not (and asked),
  // forgets it: a fill frame that needs no decode.
  enum class Want { kWanted, kUnwanted, kReplaced };
  Want want(uint32_t frame, uint64_t seq, bool forget_if_unwanted);
  // Puts claimed frames back in the queue (their budget is taken by reads) and waits a little.
  void requeue(const std::vector<uint32_t>& run, const std::map<uint32_t, uint64_t>& seq_of);
  bool spills(uint32_t frame) const { return config_.spill_over_bytes > 0 && frames_[frame].uncompressed_size > config_.spill_over_bytes; }
  // Fetches and decodes frame `frame` (spills() true) into a new FrameSpill file, from the chunk
  // cache when `use_cache` and it holds the frame. `to_cache` gets the compressed bytes to store
  // in the chunk cache (after the waiters have the frame), when they were read whole from the
  // store.
  Result<FetchedFrame> spill_frame(uint32_t frame, bool use_cache, std::string& to_cache);
  void process_spilled(uint32_t frame, uint64_t seq, bool background);
  // The range read size for a spilled frame's compressed bytes: half of spill_over_bytes, at
  // most 4 MiB.
  uint64_t spill_piece_bytes() const;
  void log_fetch_error(uint32_t frame, const Status& error);
  // Counts a chunk-cache copy of `frame` that could not be used (`why`: damaged blob, failed
  // decode, LMDB error) and logs a line for it, rate limited.
  void note_bad_cached_copy(uint32_t frame, const Status& why);

  const format::ArchiveReader& reader_;
  std::span<const format::FrameInfo> frames_;
  std::shared_ptr<ChunkCache> chunk_cache_;
  FrameCache& memory_;
  MemoryBudget& budget_;
  const FetcherConfig config_;
  FrameSpill spill_;
  FrameBuffers buffers_;
  FetchCounters counters_;

  // Guards pending_, queue_, seq_, background_active_, active_, stop_. Lock order: mu_, then
  // FrameCache's own mutex (complete() publishes to memory under mu_); never the reverse.
  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::map<uint32_t, Pending> pending_;
  std::set<QueueKey> queue_;
  // Arrival numbers count up from the middle of the range; the fill's frames moved to the front
  // (fill_follow_locked) count down from it, so the latest moved sort first.
  static constexpr uint64_t kFirstSeq = 1ull << 62;
  uint64_t seq_ = kFirstSeq;
  uint64_t front_seq_ = kFirstSeq;
  int background_active_ = 0;
  int active_ = 0;
  bool stop_ = false;
  bool background_stopped_ = false;
  std::atomic<uint64_t> fill_in_flight_{0};       // budget charges of fill runs
  std::atomic<uint64_t> readahead_in_flight_{0};  // budget charges of store-only readahead runs
  uint64_t ahead_reserved_ = 0;                   // guarded by mu_: frames keep_if_room kept that are not in memory yet
  std::set<uint32_t> deferred_ahead_;             // guarded by mu_: fill frames decode-ahead may want, turned away for room
  std::mutex log_mu_;                             // guards bad_copy_log_
  LogRateLimit bad_copy_log_;
  std::vector<std::jthread> workers_;
};

}  // namespace lazycache::fs
