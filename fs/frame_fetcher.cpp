// SPDX-License-Identifier: MIT
#include "fs/frame_fetcher.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <iostream>
#include <optional>

#include "common/byte_buffer.h"
#include "format/frame_codec.h"
#include "format/frame_source.h"
#include "format/hashing.h"

namespace lazycache::fs {

namespace {
format::FrameDataCache& cache_or_none(const std::shared_ptr<ChunkCache>& cache) { return cache ? *cache : format::no_frame_cache(); }
}  // namespace

FrameFetcher::FrameFetcher(const format::ArchiveReader& reader, std::shared_ptr<ChunkCache> chunk_cache, FrameCache& memory,
                           MemoryBudget& budget, FetcherConfig config)
    : reader_(reader), frames_(reader.index().frames()), chunk_cache_(std::move(chunk_cache)), memory_(memory), budget_(budget),
      config_(config), spill_(config.spill_dir) {
  const int n = std::max(1, config_.threads);
  workers_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
}

FrameFetcher::~FrameFetcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  idle_cv_.notify_all();
  workers_.clear();  // joins
  std::map<uint32_t, Pending> left;
  {
    std::lock_guard lock(mu_);
    left.swap(pending_);
    queue_.clear();
  }
  for (auto& [frame, p] : left) {
    for (auto& cb : p.waiters) cb(Status(ErrorCode::kCancelled, "mount is shutting down"));
  }
}

void FrameFetcher::enqueue_locked(uint32_t frame, Priority priority, bool keep_in_memory, FrameCallback cb) {
  auto it = pending_.find(frame);
  if (it != pending_.end() && it->second.claimed &&
      std::chrono::steady_clock::now() - it->second.claimed_at > std::chrono::milliseconds(config_.restart_after_ms)) {
    // Stuck in flight (see restart_after_ms): a fresh fetch takes over its waiters.
    Pending stuck = std::move(it->second);
    pending_.erase(it);
    ahead_reserved_ -= stuck.ahead_reserved;
    Pending fresh{priority, seq_++, false, stuck.keep_in_memory || keep_in_memory, std::move(stuck.waiters), {}, 0};
    if (cb) fresh.waiters.push_back(std::move(cb));
    fresh.priority = std::min(priority, stuck.priority);
    fresh.readahead_asked = stuck.readahead_asked || priority == Priority::kReadahead;
    queue_.insert(QueueKey{static_cast<uint8_t>(fresh.priority), fresh.seq, frame});
    pending_.emplace(frame, std::move(fresh));
    counters_.fetches_restarted.fetch_add(1, std::memory_order_relaxed);
    work_cv_.notify_one();
    return;
  }
  if (it != pending_.end()) {
    Pending& p = it->second;
    if (cb) p.waiters.push_back(std::move(cb));
    p.keep_in_memory = p.keep_in_memory || keep_in_memory;
    p.readahead_asked = p.readahead_asked || priority == Priority::kReadahead;
    if (!p.claimed && priority < p.priority) {
      queue_.erase(QueueKey{static_cast<uint8_t>(p.priority), p.seq, frame});
      p.priority = priority;
      queue_.insert(QueueKey{static_cast<uint8_t>(p.priority), p.seq, frame});
      work_cv_.notify_one();
    }
    return;
  }
  Pending p{priority, seq_++, false, keep_in_memory, {}, {}, 0};
  if (cb) p.waiters.push_back(std::move(cb));
  queue_.insert(QueueKey{static_cast<uint8_t>(priority), p.seq, frame});
  pending_.emplace(frame, std::move(p));
  work_cv_.notify_one();
}

void FrameFetcher::get(uint32_t frame, Priority priority, FrameCallback cb) {
  get_range(frame, frame, priority, [cb = std::move(cb)](uint32_t, Result<FetchedFrame> r) { cb(std::move(r)); });
}

void FrameFetcher::get_range(uint32_t first, uint32_t last, Priority priority, std::function<void(uint32_t, Result<FetchedFrame>)> cb) {
  if (last < first || last >= frames_.size()) {
    cb(first, Status(ErrorCode::kInvalidArgument, "frames " + std::to_string(first) + ".." + std::to_string(last) + " out of range"));
    return;
  }
  std::vector<uint32_t> missing;
  for (uint32_t f = first; f <= last; ++f) {
    if (FramePtr p = memory_.get(f)) {
      counters_.frames_from_memory.fetch_add(1, std::memory_order_relaxed);
      cb(f, FetchedFrame{std::move(p), nullptr});
    } else if (SpilledFramePtr sp = spills(f) ? spill_.get(f) : nullptr) {
      counters_.frames_from_memory.fetch_add(1, std::memory_order_relaxed);
      cb(f, FetchedFrame{nullptr, std::move(sp)});
    } else {
      missing.push_back(f);
    }
  }
  if (missing.empty()) return;
  std::unique_lock lock(mu_);
  if (stop_) {
    lock.unlock();
    for (uint32_t f : missing) cb(f, Status(ErrorCode::kCancelled, "mount is shutting down"));
    return;
  }
  auto shared_cb = std::make_shared<std::function<void(uint32_t, Result<FetchedFrame>)>>(std::move(cb));
  for (uint32_t f : missing) {
    enqueue_locked(f, priority, true, [shared_cb, f](Result<FetchedFrame> r) { (*shared_cb)(f, std::move(r)); });
  }
}

Result<FetchedFrame> FrameFetcher::get_sync(uint32_t frame, Priority priority) {
  std::promise<Result<FetchedFrame>> done;
  auto fut = done.get_future();
  get(frame, priority, [&done](Result<FetchedFrame> r) { done.set_value(std::move(r)); });
  return fut.get();
}

void FrameFetcher::prefetch(uint32_t first, uint32_t last, Priority priority) {
  if (frames_.empty()) return;
  last = std::min<uint32_t>(last, static_cast<uint32_t>(frames_.size() - 1));
  // Readahead frames are held in memory only without a chunk cache; with one they are stored
  // there, undecoded, and decoded into memory only while the budget has room (store_only()).
  const bool readahead = priority <= Priority::kReadahead;
  const bool keep = readahead && chunk_cache_ == nullptr;
  std::lock_guard lock(mu_);
  if (stop_ || (background_stopped_ && priority >= Priority::kPrefetch)) return;
  for (uint32_t f = first; f <= last; ++f) {
    if (readahead && (memory_.contains(f) || memory_.kernel_holds(f) || (spills(f) && spill_.get(f) != nullptr))) continue;
    enqueue_locked(f, priority, keep, nullptr);
  }
}

bool FrameFetcher::idle() const {
  std::lock_guard lock(mu_);
  return queue_.empty() && active_ == 0;
}

size_t FrameFetcher::pending() const {
  std::lock_guard lock(mu_);
  return queue_.size() + active_;
}

void FrameFetcher::stop_background() {
  std::lock_guard lock(mu_);
  background_stopped_ = true;
  deferred_ahead_.clear();
  for (auto it = queue_.begin(); it != queue_.end();) {
    const auto [prio, seq, frame] = *it;
    auto p = pending_.find(frame);
    if (prio >= static_cast<uint8_t>(Priority::kPrefetch) && p != pending_.end() && p->second.waiters.empty()) {
      pending_.erase(p);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  if (queue_.empty() && active_ == 0) idle_cv_.notify_all();
}

void FrameFetcher::wait_idle() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [this] { return stop_ || (queue_.empty() && active_ == 0); });
}

std::vector<uint32_t> FrameFetcher::claim_run_locked(Priority& priority, std::vector<uint64_t>& seqs) {
  if (queue_.empty()) return {};
  // Plain variables, not a structured binding: the lambdas below capture them, which C++20 allows
  // for bindings but clang before 16 does not (tidy_check parses this file with clang 14).
  const uint8_t prio = std::get<0>(*queue_.begin());
  const uint32_t frame = std::get<2>(*queue_.begin());
  priority = static_cast<Priority>(prio);
  const bool background = priority >= Priority::kPrefetch;
  // The queue is ordered by priority, so if the most urgent entry is background work and its
  // workers are all busy, nothing else may run either.
  if (background) {
    const bool reading = active_ > background_active_;  // a read's own fetch is in flight
    const int cap = reading ? std::min(config_.background_threads, config_.background_threads_while_reading) : config_.background_threads;
    if (background_active_ >= std::max(cap, 0)) return {};
  }
  const auto now = std::chrono::steady_clock::now();
  auto claim = [this, now](uint32_t f) {
    Pending& p = pending_.at(f);
    queue_.erase(QueueKey{static_cast<uint8_t>(p.priority), p.seq, f});
    p.claimed = true;
    p.claimed_at = now;
    return frames_[f].compressed_size;
  };
  // Only frames of the same priority join a run: a reader waiting on an on-demand frame must not
  // wait for the readahead behind it to arrive too (a run completes as one range read), and
  // readahead split into several runs travels over several connections at once.
  // A spilled frame is fetched alone: its run is its own pieces (process_spilled).
  auto claimable = [this, prio, frame](uint32_t f) {
    auto it = pending_.find(f);
    return !spills(frame) && !spills(f) && it != pending_.end() && !it->second.claimed && static_cast<uint8_t>(it->second.priority) == prio;
  };
  uint64_t limit = prio == static_cast<uint8_t>(Priority::kOnDemand) ? config_.merge_bytes_on_demand
                   : background                                      ? config_.merge_bytes_background
                                                                     : config_.merge_bytes;
  // A readahead or fill run stays within its share of the budget (a small budget's share is
  // smaller than the merge size).
  if (priority != Priority::kOnDemand && config_.fill_memory_bytes > 0) limit = std::min(limit, config_.fill_memory_bytes);
  std::vector<uint32_t> run{frame};
  uint64_t bytes = claim(frame);
  for (uint32_t f = frame + 1; f < frames_.size() && claimable(f) && bytes + frames_[f].compressed_size <= limit; ++f) {
    bytes += claim(f);
    run.push_back(f);
  }
  for (uint32_t f = frame; f > 0 && claimable(f - 1) && bytes + frames_[f - 1].compressed_size <= limit; --f) {
    bytes += claim(f - 1);
    run.insert(run.begin(), f - 1);
  }
  seqs.clear();
  for (uint32_t f : run) seqs.push_back(pending_.at(f).seq);
  if (priority == Priority::kOnDemand) fill_follow_locked(run.back());
  return run;
}

void FrameFetcher::fill_follow_locked(uint32_t frame) {
  const uint64_t end = std::min<uint64_t>(frames_.size(), uint64_t{frame} + 1 + config_.fill_follow_frames);
  std::vector<uint32_t> moved;
  for (uint64_t f = uint64_t{frame} + 1; f < end; ++f) {
    auto it = pending_.find(static_cast<uint32_t>(f));
    if (it != pending_.end() && !it->second.claimed && it->second.priority == Priority::kBackground)
      moved.push_back(static_cast<uint32_t>(f));
  }
  if (moved.empty()) return;
  front_seq_ -= moved.size();
  uint64_t seq = front_seq_;
  constexpr auto kBackground = static_cast<uint8_t>(Priority::kBackground);
  for (uint32_t f : moved) {
    Pending& p = pending_.at(f);
    queue_.erase(QueueKey{kBackground, p.seq, f});
    p.seq = seq++;
    queue_.insert(QueueKey{kBackground, p.seq, f});
  }
}

void FrameFetcher::worker_loop() {
  while (true) {
    std::vector<uint32_t> run;
    std::vector<uint64_t> seqs;
    Priority priority = Priority::kOnDemand;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] {
        if (stop_) return true;
        run = claim_run_locked(priority, seqs);
        return !run.empty();
      });
      if (stop_) {
        for (uint32_t f : run)
          pending_.at(f).claimed = false;  // failed as kCancelled by the destructor (claimed just now, under this lock)
        return;
      }
      ++active_;
      if (priority >= Priority::kPrefetch) ++background_active_;
    }
    process_run(run, seqs, priority);
    {
      std::lock_guard lock(mu_);
      --active_;
      if (priority >= Priority::kPrefetch) --background_active_;
      requeue_deferred_ahead_locked();
      if (queue_.empty() && active_ == 0) idle_cv_.notify_all();
    }
    work_cv_.notify_all();  // a background slot may have freed up
  }
}

uint64_t FrameFetcher::reserve_for(uint64_t bytes, Charge charge) {
  if (charge == Charge::kRead) {
    if (!budget_.try_reserve(bytes)) {
      memory_.make_room(bytes);
      budget_.reserve_forced(bytes);
    }
    return bytes;
  }
  // Fill and readahead may evict in-memory frames, but each only within its own share: the rest
  // stays the readers'. A first run always may go (a share smaller than one run must not stall).
  std::atomic<uint64_t>& in_flight = charge == Charge::kFill ? fill_in_flight_ : readahead_in_flight_;
  // Taken first (compare and swap: workers claiming runs at once must not all pass the check).
  for (uint64_t cur = in_flight.load(std::memory_order_relaxed);;) {
    if (cur > 0 && cur + bytes > config_.fill_memory_bytes) return 0;
    if (in_flight.compare_exchange_weak(cur, cur + bytes, std::memory_order_relaxed)) break;
  }
  if (!budget_.try_reserve(bytes)) {
    memory_.make_room(bytes);
    if (!budget_.try_reserve(bytes)) {
      in_flight.fetch_sub(bytes, std::memory_order_relaxed);
      return 0;
    }
  }
  return bytes;
}

void FrameFetcher::release_charge(uint64_t bytes, Charge charge) {
  budget_.release(bytes);
  if (charge != Charge::kRead)
    (charge == Charge::kFill ? fill_in_flight_ : readahead_in_flight_).fetch_sub(bytes, std::memory_order_relaxed);
}

FrameFetcher::Charge FrameFetcher::charge_for(Priority priority) {
  return priority == Priority::kOnDemand ? Charge::kRead : priority == Priority::kReadahead ? Charge::kReadahead : Charge::kFill;
}

// Fresh GETs of a frame whose bytes failed their digest before the waiting reads fail: three
// attempts in all, as for the store's transport errors (--retries 3).
constexpr uint8_t kCorruptRefetches = 2;

void FrameFetcher::complete(uint32_t frame, uint64_t seq, const Result<FetchedFrame>& fetched) {
  // Every frame is in the index, so a source that answers "not found" lost the archive object
  // (deleted, pruned or moved away under the mount): an I/O error for the reader, never ENOENT
  // from read(2) on a file that is listed, or from a write that copies it up.
  std::optional<Result<FetchedFrame>> gone;
  if (!fetched.ok() && fetched.error().code() == ErrorCode::kNotFound)
    gone.emplace(Status(ErrorCode::kUnavailable, "the archive is no longer readable: " + fetched.error().message()));
  const Result<FetchedFrame>& result = gone ? *gone : fetched;
  Pending p{};
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(frame);
    if (it == pending_.end() || it->second.seq != seq) return;  // replaced: a fresh fetch serves its waiters
    p = std::move(it->second);
    ahead_reserved_ -= p.ahead_reserved;
    // Publish to memory before forgetting the pending entry, so a concurrent get() finds the
    // frame in one place or the other and never starts a second fetch.
    if (result.ok() && p.keep_in_memory && result->bytes != nullptr) {
      // Read ahead and not read yet: evicted last, within its share (else an ordinary frame).
      const bool ahead = (p.priority == Priority::kReadahead || p.readahead_asked) && p.waiters.empty() &&
                         memory_.ahead_bytes() + result->bytes->size() <= config_.ahead_memory_bytes;
      memory_.put(frame, result->bytes, ahead);
    }
    pending_.erase(it);
    if (!result.ok() && p.priority >= Priority::kPrefetch && !p.waiters.empty() && !stop_) {
      // A failing fill fails no reader: the readers who joined it get a fetch of their own.
      counters_.fill_retried.fetch_add(1, std::memory_order_relaxed);
      for (auto& cb : p.waiters) enqueue_locked(frame, Priority::kOnDemand, p.keep_in_memory, std::move(cb));
      return;
    }
    if (!result.ok() && result.error().code() == ErrorCode::kCorrupt && !p.waiters.empty() && !stop_ &&
        p.corrupt_refetches < kCorruptRefetches) {
      // Bytes damaged on the way (a digest mismatch, a short body) are a transient fault like a
      // reset connection: fetch again, a bounded number of times. Without this, two damaged
      // replies in a row (the read and the kernel's immediate retry) failed the read.
      const uint8_t refetches = p.corrupt_refetches + 1;
      for (auto& cb : p.waiters) enqueue_locked(frame, p.priority, p.keep_in_memory, std::move(cb));
      pending_.at(frame).corrupt_refetches = refetches;
      return;
    }
  }
  if (p.priority >= Priority::kPrefetch && result.ok()) counters_.prefetched_frames.fetch_add(1, std::memory_order_relaxed);
  const bool ahead = p.decode_ahead && p.waiters.empty();
  if (ahead && result.ok() && result->bytes != nullptr) counters_.frames_decoded_ahead.fetch_add(1, std::memory_order_relaxed);
  for (auto& cb : p.waiters) cb(result);
  // After the replies: the kernel unlocks the pages of the reads just answered, which a hand-off
  // of the same files to its page cache would otherwise wait for.
  if (result.ok() && result->bytes != nullptr && config_.on_decoded) config_.on_decoded(frame, result->bytes, ahead);
}

void FrameFetcher::log_fetch_error(uint32_t frame, const Status& error) {
  if (error.code() == ErrorCode::kCancelled) return;  // the source's reads were ended (the mount is ending)
  counters_.fetch_errors.fetch_add(1, std::memory_order_relaxed);
  const format::FrameInfo& info = frames_[frame];
  std::cerr << "lazycache: frame " << frame << " (bytes " << info.compressed_offset << "+" << info.compressed_size << ") of "
            << reader_.source().describe() << ": " << error.to_string() << "\n";
}

void FrameFetcher::requeue(const std::vector<uint32_t>& run, const std::map<uint32_t, uint64_t>& seq_of) {
  // The budget is taken by reads: put the background work back and let them finish first.
  std::unique_lock lock(mu_);
  for (uint32_t f : run) {
    auto it = pending_.find(f);
    if (it == pending_.end() || it->second.seq != seq_of.at(f)) continue;  // replaced meanwhile
    Pending& p = it->second;
    p.claimed = false;
    queue_.insert(QueueKey{static_cast<uint8_t>(p.priority), p.seq, f});
  }
  work_cv_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stop_; });
}

namespace {
// Compressed bytes of a spilled frame too large to read whole are read in pieces of at most
// this: the merge size of readahead (FetcherConfig::merge_bytes), a good range read on a hosted
// link; smaller with a small budget (spill_piece_bytes()).
constexpr uint64_t kSpillPieceBytes = 4ull << 20;
// FrameDecoder's output buffer.
constexpr uint64_t kDecodeBufferBytes = 1ull << 20;
}  // namespace

uint64_t FrameFetcher::spill_piece_bytes() const { return std::clamp<uint64_t>(config_.spill_over_bytes / 2, 64 << 10, kSpillPieceBytes); }

void FrameFetcher::process_spilled(uint32_t frame, uint64_t seq, bool background) {
  const format::FrameInfo& info = frames_[frame];
  const bool whole = info.compressed_size <= config_.spill_over_bytes;
  bool on_demand = false;
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(frame);
    on_demand = it != pending_.end() && it->second.priority == Priority::kOnDemand;
  }
  // Only a reader waiting for the frame may take budget past the limit: several spilled frames
  // read ahead at once would otherwise add up to more than a small budget.
  const Charge kind = background ? Charge::kFill : on_demand ? Charge::kRead : Charge::kReadahead;
  const uint64_t charge = reserve_for((whole ? info.compressed_size : spill_piece_bytes()) + kDecodeBufferBytes, kind);
  if (charge == 0) {
    requeue({frame}, {{frame, seq}});
    return;
  }
  std::string to_cache;
  Result<FetchedFrame> out = spill_frame(frame, chunk_cache_ != nullptr, to_cache);
  if (!out.ok()) log_fetch_error(frame, out.error());
  complete(frame, seq, out);
  if (!to_cache.empty()) {
    ignore_error(chunk_cache_->put(info.digest, std::as_bytes(std::span(to_cache.data(), to_cache.size()))),
                 "the chunk cache warns once and backs off");
  }
  release_charge(charge, kind);
}

Result<FetchedFrame> FrameFetcher::spill_frame(uint32_t frame, bool use_cache, std::string& to_cache) {
  const format::FrameInfo& info = frames_[frame];
  LC_ASSIGN_OR_RETURN(std::shared_ptr<SpilledFrame> file, SpilledFrame::create(spill_.dir()));
  format::FrameDecoder decoder(info, frame, [&file](std::span<const std::byte> bytes) { return file->append(bytes); });
  const format::FrameSource source(reader_.source(), frames_, cache_or_none(chunk_cache_),
                                   [this](uint32_t f, const Status& why) { note_bad_cached_copy(f, why); });
  auto read_piece = [&](uint64_t offset, auto& buf) -> Status {
    const format::RangeRead got = source.read_range(offset, std::as_writable_bytes(std::span(buf.data(), buf.size())),
                                                    "frame " + std::to_string(frame));
    counters_.store_range_reads.fetch_add(1, std::memory_order_relaxed);
    counters_.store_bytes.fetch_add(got.bytes_read, std::memory_order_relaxed);
    return got.status;
  };
  if (info.compressed_size <= config_.spill_over_bytes) {
    ByteBuffer compressed;
    bool from_cache = false;
    if (use_cache) {
      auto cached = source.cached(frame);  // a bad copy is noted (note_bad_cached_copy) and a miss
      if (cached.ok()) {
        compressed = std::move(cached).value();
        from_cache = true;
      }
    }
    if (!from_cache) {
      compressed.resize(info.compressed_size);  // the read fills it
      LC_RETURN_IF_ERROR(read_piece(info.compressed_offset, compressed));
    }
    Status decoded = decoder.feed(std::as_bytes(std::span(compressed.data(), compressed.size())));
    if (decoded.ok()) decoded = decoder.finish();
    if (!decoded.ok() && from_cache) {
      note_bad_cached_copy(frame, decoded);
      return spill_frame(frame, false, to_cache);
    }
    LC_RETURN_IF_ERROR(decoded);
    (from_cache ? counters_.frames_from_chunk_cache : counters_.frames_from_store).fetch_add(1, std::memory_order_relaxed);
    if (!from_cache && chunk_cache_ != nullptr) to_cache.assign(compressed.view());
  } else {
    std::string piece;
    for (uint64_t done = 0; done < info.compressed_size; done += piece.size()) {
      piece.assign(std::min(spill_piece_bytes(), info.compressed_size - done), '\0');
      LC_RETURN_IF_ERROR(read_piece(info.compressed_offset + done, piece));
      LC_RETURN_IF_ERROR(decoder.feed(std::as_bytes(std::span(piece.data(), piece.size()))));
    }
    LC_RETURN_IF_ERROR(decoder.finish());
    counters_.frames_from_store.fetch_add(1, std::memory_order_relaxed);
  }
  counters_.frames_spilled.fetch_add(1, std::memory_order_relaxed);
  counters_.frames_decoded.fetch_add(1, std::memory_order_relaxed);
  spill_.put(frame, file);
  return FetchedFrame{nullptr, std::move(file)};
}

void FrameFetcher::note_bad_cached_copy(uint32_t frame, const Status& why) {
  counters_.chunk_cache_bad.fetch_add(1, std::memory_order_relaxed);
  uint64_t suppressed = 0;
  {
    std::lock_guard lock(log_mu_);
    if (!bad_copy_log_.allow(LogRateLimit::Clock::now(), suppressed)) return;
  }
  std::cerr << "lazycache: chunk cache copy of frame " << frame << " of " << reader_.source().describe() << " is unusable ("
            << why.to_string() << "); refetching it from the store";
  if (suppressed > 0) std::cerr << " (" << suppressed << " more damaged copies were not logged)";
  std::cerr << "\n";
}

void FrameFetcher::process_run(const std::vector<uint32_t>& run, const std::vector<uint64_t>& seqs, Priority priority) {
  const bool background = priority >= Priority::kPrefetch;
  // Fill and (with a chunk cache) readahead: frames nobody waits for go to the chunk cache
  // undecoded, and the run is charged its compressed bytes within the fill's share.
  const bool store_only = chunk_cache_ != nullptr && priority >= Priority::kReadahead;
  std::map<uint32_t, uint64_t> seq_of;
  for (size_t k = 0; k < run.size(); ++k) seq_of[run[k]] = seqs[k];
  uint64_t compressed = 0;
  for (uint32_t f : run) compressed += frames_[f].compressed_size;
  if (run.size() == 1 && spills(run[0])) {
    process_spilled(run[0], seqs[0], background);
    return;
  }
  // A run is charged its compressed bytes; a decoded frame is charged by the FrameCache that
  // holds it (charging the decode here too counted it twice, and with the chunk-cache writes
  // after delivery those charges outlived the read: reads back to back on a small budget made
  // make_room() evict the very frame the next read needed). Store-only runs (fill, readahead)
  // stay within their share; a read's run may go past the limit.
  const Charge kind = store_only ? charge_for(priority) : Charge::kRead;
  const uint64_t charge = reserve_for(compressed, kind);
  if (charge == 0) {
    requeue(run, seq_of);
    return;
  }

  const format::FrameSource source(reader_.source(), frames_, cache_or_none(chunk_cache_),
                                   [this](uint32_t f, const Status& why) { note_bad_cached_copy(f, why); });
  std::vector<uint32_t> missing;
  for (uint32_t f : run) {
    // A fill frame already cached, that nobody waits for: nothing to read, nothing to decode.
    if (store_only && want(f, seq_of[f], false) != Want::kWanted && !keep_if_room(f, seq_of[f]) &&
        chunk_cache_->contains(frames_[f].digest) && want(f, seq_of[f], true) != Want::kWanted) {
      continue;
    }
    if (chunk_cache_ != nullptr) {
      auto cached = source.cached(f);  // a bad copy is noted (note_bad_cached_copy) and a miss
      if (cached.ok()) {
        auto decoded = buffers_.decode(frames_[f], f, std::as_bytes(std::span(cached->data(), cached->size())));
        counters_.frames_decoded.fetch_add(1, std::memory_order_relaxed);
        if (decoded.ok()) {
          counters_.frames_from_chunk_cache.fetch_add(1, std::memory_order_relaxed);
          complete(f, seq_of[f], FetchedFrame{std::move(decoded).value(), nullptr});
          continue;
        }
        note_bad_cached_copy(f, decoded.error());
      }
    }
    missing.push_back(f);
  }

  for (const std::pair<size_t, size_t>& positions : format::contiguous_runs(frames_, missing)) {
    // A contiguous run of frames in the archive object: one range read.
    const size_t first = positions.first, end = positions.second;
    const uint64_t offset = frames_[missing[first]].compressed_offset;
    ByteBuffer buf(source.span_bytes(missing[first], missing[end - 1]));  // the read writes every byte
    std::vector<uint32_t> to_cache;
    auto bytes_of = [&](uint32_t f) {
      return std::as_bytes(std::span(buf.data() + (frames_[f].compressed_offset - offset), frames_[f].compressed_size));
    };
    // `checked`: the read's failure, or the frame's check. `cached`: the chunk cache has it
    // already (store_unwanted put it there): a second put would write the blob again (on a nearly
    // full disk, past the room the cache must leave).
    auto deliver = [&](uint32_t f, const Status& checked, bool cached = false) {
      Result<FetchedFrame> out = checked;
      if (checked.ok()) {
        auto decoded = buffers_.decode(frames_[f], f, bytes_of(f));
        counters_.frames_decoded.fetch_add(1, std::memory_order_relaxed);
        if (decoded.ok()) {
          if (chunk_cache_ != nullptr && !cached) to_cache.push_back(f);
          counters_.frames_from_store.fetch_add(1, std::memory_order_relaxed);
          out = FetchedFrame{std::move(decoded).value(), nullptr};
        } else {
          out = decoded.error();
        }
      }
      if (!out.ok()) log_fetch_error(f, out.error());
      complete(f, seq_of[f], out);
    };
    // A frame that is wanted (a reader waits for it, or it is kept in memory) is delivered as
    // soon as its bytes are in and checked, while the rest of the run still arrives (read_run's
    // `ready`, on this thread): a reader waiting on the first frames of a readahead or fill run
    // no longer waits for the run's last byte. Fill frames nobody wants wait for the run's end.
    std::vector<char> delivered(end - first, 0);
    auto ready = [&](uint32_t f) {
      if (store_only && !keep_if_room(f, seq_of[f]) && want(f, seq_of[f], false) != Want::kWanted) return;
      delivered[f - missing[first]] = 1;
      deliver(f, Status());
    };
    const format::RangeRead got = source.read_run(missing[first], missing[end - 1],
                                                  std::as_writable_bytes(std::span(buf.data(), buf.size())), 0, ready);
    counters_.store_range_reads.fetch_add(1, std::memory_order_relaxed);
    counters_.store_bytes.fetch_add(got.bytes_read, std::memory_order_relaxed);
    if (background) counters_.fill_bytes.fetch_add(got.bytes_read, std::memory_order_relaxed);
    const Status& failed = got.status;
    // Fill frames nobody waits for are stored after the run's wanted frames are delivered: a
    // reader waiting on a frame late in a fill run does not wait for the blob writes before it.
    std::vector<uint32_t> fill_only;
    for (size_t k = first; k < end; ++k) {
      const uint32_t f = missing[k];
      if (delivered[k - first]) continue;
      const Status& checked = got.frames[k - first];
      if (store_only && failed.ok() && !keep_if_room(f, seq_of[f]) && want(f, seq_of[f], false) != Want::kWanted) {
        fill_only.push_back(f);
      } else {
        deliver(f, checked);
      }
    }
    for (uint32_t f : fill_only) {
      const Stored stored = store_unwanted(f, seq_of[f], bytes_of(f), background);
      if (stored != Stored::kDone) deliver(f, got.frames[f - missing[first]], stored == Stored::kStoredButWanted);  // wanted meanwhile
    }
    // The chunk cache is written after the waiters have their frames: a blob write and an LMDB
    // commit are disk work a reader should not wait for.
    for (uint32_t f : to_cache) {
      // A failed write is logged by the cache, once per episode (a full disk would otherwise log
      // a line per frame), and then paused: the frame was served all the same.
      ignore_error(chunk_cache_->put(frames_[f].digest, bytes_of(f)), "the chunk cache warns once and backs off");
    }
  }
  release_charge(charge, kind);
}

void FrameFetcher::requeue_deferred_ahead_locked() {
  if (deferred_ahead_.empty() || stop_ || background_stopped_) return;
  // As many as the share has room for now (decodes in flight: keep_if_room); the rest wait for
  // the next run to end.
  uint64_t room_used = ahead_reserved_;
  for (auto it = deferred_ahead_.begin(); it != deferred_ahead_.end();) {
    const uint32_t f = *it;
    const uint64_t size = frames_[f].uncompressed_size;
    if (room_used + size > config_.ahead_memory_bytes) break;
    if (pending_.count(f) != 0) {  // still in the run that turned it away (or asked for again): later
      ++it;
      continue;
    }
    it = deferred_ahead_.erase(it);
    if (memory_.contains(f)) continue;  // a read decoded it meanwhile
    room_used += size;
    // keep_if_room asks decode_ahead again when it comes: the frame may no longer be worth it.
    enqueue_locked(f, Priority::kBackground, false, nullptr);
  }
}

bool FrameFetcher::keep_if_room(uint32_t frame, uint64_t seq) {
  std::lock_guard lock(mu_);
  auto it = pending_.find(frame);
  if (it == pending_.end() || it->second.seq != seq) return false;
  Pending& p = it->second;
  if (p.keep_in_memory) return true;
  // A fill frame nobody walks towards is decoded only when decode_ahead wants its files in the
  // kernel's page cache (asked last: it has a cost of its own).
  const bool walked_towards = p.priority == Priority::kReadahead || p.readahead_asked;
  const uint64_t size = frames_[frame].uncompressed_size;
  // A frame decoded for a reader walking towards it stays in memory until that reader comes
  // (FrameCache's ahead class), so it counts the frames held there. A frame decoded only for the
  // page-cache hand-off is dropped as soon as its files went (Filesystem::hand_to_page_cache): it
  // counts only the decodes in flight. Counting the held frames for it too stopped decode-ahead
  // for the rest of a mount whenever two readahead frames were never read (a `tsc --version`
  // reading the start of a large file): every later frame was turned away and the job's first
  // read of each waited for its decode (node's partial job: 0 of 50 frames decoded ahead in some
  // runs, 38 in others).
  const uint64_t held = walked_towards ? memory_.ahead_bytes() : 0;
  if (held + ahead_reserved_ + size > config_.ahead_memory_bytes) {
    // No room in the ahead share now: a fill frame decode-ahead may want is tried again when a
    // run ends and there is room, not left to the job's first read of it, which would then wait
    // for its decode.
    if (!walked_towards && config_.decode_ahead && !background_stopped_) deferred_ahead_.insert(frame);
    return false;
  }
  if (!walked_towards) {
    if (!config_.decode_ahead || !config_.decode_ahead(frame)) return false;
    p.decode_ahead = true;
  }
  p.keep_in_memory = true;
  p.ahead_reserved = size;
  ahead_reserved_ += size;
  return true;
}

FrameFetcher::Want FrameFetcher::want(uint32_t frame, uint64_t seq, bool forget_if_unwanted) {
  std::lock_guard lock(mu_);
  auto it = pending_.find(frame);
  if (it == pending_.end() || it->second.seq != seq) return Want::kReplaced;
  if (!it->second.waiters.empty() || it->second.keep_in_memory) return Want::kWanted;
  if (forget_if_unwanted) pending_.erase(it);
  return Want::kUnwanted;
}

FrameFetcher::Stored FrameFetcher::store_unwanted(uint32_t frame, uint64_t seq, std::span<const std::byte> compressed, bool fill) {
  if (chunk_cache_ == nullptr || want(frame, seq, false) == Want::kWanted) return Stored::kWanted;
  const format::FrameInfo& info = frames_[frame];
  if (format::xxh3_128(compressed) != info.digest) return Stored::kWanted;  // decode_frame reports it
  // Stored before the pending entry goes, so a read arriving meanwhile either joins this fetch or
  // finds the frame in the chunk cache, never a second store read.
  ignore_error(chunk_cache_->put(info.digest, compressed), "the chunk cache warns once and backs off");
  // Decode-ahead may want it by now: a fill run stores its frames one after the other, and the
  // files of the later ones become known meanwhile (the tree walk runs beside it). Without this
  // second look a frame that became known during the run was stored undecoded, and a request to
  // decode it that joined the run in flight was lost with it.
  if (keep_if_room(frame, seq)) return Stored::kStoredButWanted;
  if (want(frame, seq, true) == Want::kWanted) return Stored::kStoredButWanted;  // a reader joined during the put
  counters_.frames_from_store.fetch_add(1, std::memory_order_relaxed);
  (fill ? counters_.prefetched_frames : counters_.readahead_stored).fetch_add(1, std::memory_order_relaxed);
  return Stored::kDone;
}

}  // namespace lazycache::fs
