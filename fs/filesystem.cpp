// SPDX-License-Identifier: MIT
#include "fs/filesystem.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <future>
#include <iostream>
#include <iterator>

namespace lazycache::fs {

// The last timed-out read of one open file. When a FUSE read fails, the kernel reads the same
// page again at once through the same file (readahead failed, so read_folio retries it): without
// this, a stalled store cost the reader two read timeouts (issue 13). A read of the same frames
// through the same handle within a read timeout of the timeout gets the failure at once, unless
// the store has delivered a frame since (it works again). A new open (a job retrying) tries the
// store again, and so does this handle after the timeout; with zero-message opens the handle is
// the inode's and outlives opens (fs/inode_handles.h), so only the store's recovery or the
// timeout end the repeat. Errors the store reported are not remembered: they come back fast,
// and a retry may succeed.
struct RecentFailure {
  std::mutex mu;  // guards the fields below
  bool set = false;
  uint32_t first_frame = 0, last_frame = 0;
  Status error;
  std::chrono::steady_clock::time_point at{};
  uint64_t store_frames_at = 0;  // frames the store had delivered at the failure

  void record(uint32_t first, uint32_t last, const Status& why, uint64_t store_frames) {
    std::lock_guard lock(mu);
    set = true;
    first_frame = first;
    last_frame = last;
    error = why;
    at = std::chrono::steady_clock::now();
    store_frames_at = store_frames;
  }
  // The failure a read of frames [first, last] should repeat, if any.
  std::optional<Status> repeat_for(uint32_t first, uint32_t last, std::chrono::milliseconds window, uint64_t store_frames) {
    std::lock_guard lock(mu);
    if (!set || last < first_frame || first > last_frame || std::chrono::steady_clock::now() - at >= window) return std::nullopt;
    if (store_frames != store_frames_at) return std::nullopt;
    return error;
  }
};

struct Filesystem::OpenFile {
  EntryId id = 0;
  uint64_t data_offset = 0;
  uint64_t size = 0;
  uint32_t first_frame = 0;  // of the file's data
  std::mutex mu;             // guards policy, dropped_behind
  ReadAheadPolicy policy;
  uint32_t dropped_behind = 0;  // frames before this one were dropped behind the reader
  // Shared with the file's reads in flight: they record their failure after the file may have
  // been released.
  std::shared_ptr<RecentFailure> failure = std::make_shared<RecentFailure>();
};

struct Filesystem::ReadOp {
  uint64_t id = 0;
  std::chrono::steady_clock::time_point deadline;
  uint64_t stream_offset = 0;  // in the uncompressed tar stream
  size_t length = 0;
  uint32_t first_frame = 0, last_frame = 0;
  std::shared_ptr<RecentFailure> file_failure;  // of the file read
  std::atomic<bool> done{false};
  ReadCallback cb;  // called once, by whoever sets done first
  std::mutex mu;    // guards frames, remaining, error
  std::vector<FetchedFrame> frames;
  size_t remaining = 0;
  Status error;
};

namespace {
// A fetch in flight longer than the read timeout has failed every reader waiting on it; a new
// reader joining it would fail the same way, so it gets a fresh fetch instead.
// A frame larger than a quarter of the budget is spilled to a file (fs/frame_spill.h): held in
// memory it would leave too little for the frames around it, or not fit at all.
FetcherConfig fetcher_config(const FilesystemConfig& c, const std::shared_ptr<ChunkCache>& cache,
                             std::function<void(uint32_t, const FramePtr&, bool)> on_decoded, std::function<bool(uint32_t)> decode_ahead) {
  FetcherConfig f = c.fetcher;
  f.on_decoded = std::move(on_decoded);
  if (c.decode_ahead_bytes > 0) f.decode_ahead = std::move(decode_ahead);
  if (c.read_timeout_ms > 0) f.restart_after_ms = std::min<uint64_t>(f.restart_after_ms, c.read_timeout_ms);
  if (f.spill_over_bytes == 0) f.spill_over_bytes = std::max<uint64_t>(c.memory_budget_bytes / 4, 1);
  if (f.fill_memory_bytes == 0) f.fill_memory_bytes = std::max<uint64_t>(c.memory_budget_bytes / 4, 1);
  if (f.ahead_memory_bytes == 0) f.ahead_memory_bytes = c.memory_budget_bytes / 4;
  if (!c.spill_dir.empty()) {
    f.spill_dir = c.spill_dir;
  } else if (cache != nullptr) {
    f.spill_dir = cache->dir() + "/tmp";  // the disk the cache was given
  } else if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp == '/') {
    f.spill_dir = tmp;
  }
  return f;
}

// The configuration with its memory budget resolved: none given (0) is auto_memory_budget() of
// the archive's tar stream.
FilesystemConfig with_memory_budget(FilesystemConfig c, const format::Index& index) {
  if (c.memory_budget_bytes == 0) {
    const auto frames = index.frames();
    const uint64_t stream = frames.empty() ? 0 : frames.back().uncompressed_offset + frames.back().uncompressed_size;
    c.memory_budget_bytes = auto_memory_budget(stream);
  }
  return c;
}

// Bytes [offset, offset + length) of a delivered frame, as a piece of a read.
Result<ReadPiece> piece_of(const FetchedFrame& frame, uint64_t offset, uint64_t length) {
  if (frame.spilled != nullptr) {
    LC_ASSIGN_OR_RETURN(FramePtr slice, frame.spilled->read(offset, static_cast<size_t>(length)));
    return ReadPiece{std::move(slice), 0, static_cast<size_t>(length)};
  }
  if (frame.bytes == nullptr || frame.bytes->size() < offset + length) return Status(ErrorCode::kCorrupt, "does not cover the read");
  return ReadPiece{frame.bytes, static_cast<size_t>(offset), static_cast<size_t>(length)};
}
}  // namespace

Filesystem::Filesystem(std::unique_ptr<format::ArchiveReader> reader, std::shared_ptr<ChunkCache> chunk_cache, FilesystemConfig config)
    : reader_(std::move(reader)), config_(with_memory_budget(config, reader_->index())), budget_(config_.memory_budget_bytes),
      memory_(budget_), chunk_cache_(std::move(chunk_cache)),
      fetcher_(std::make_unique<FrameFetcher>(
          *reader_, chunk_cache_, memory_, budget_,
          fetcher_config(
              config_, chunk_cache_, [this](uint32_t frame, const FramePtr& bytes, bool ahead) { hand_to_page_cache(frame, bytes, ahead); },
              [this](uint32_t frame) { return take_decode_ahead(frame); }))),
      started_(std::chrono::steady_clock::now()), archive_ahead_(config.archive_readahead), opened_(reader_->index().entry_count(), false),
      watchdog_([this](std::stop_token st) { watchdog(st); }) {
  // The hot region is the run of the stream the hot files fill (the start of a packed archive,
  // the end's first part after an incremental save moved them), up to the first hot file that
  // is not in it (a save that could not move every learned file lists the rest after).
  uint64_t region_start = 0, region_end = 0;
  bool first = true;
  for (EntryId id : index().hot_list()) {
    if (id >= index().entry_count()) break;
    const format::Entry e = index().entry(canonical(id));
    if (e.type != format::EntryType::kRegular) continue;
    if (first) region_start = region_end = e.data_offset;
    first = false;
    if (e.data_offset < region_start || e.data_offset > region_end + (1 << 20)) break;  // past a gap
    region_end = std::max(region_end, e.data_offset + e.size);
  }
  if (region_end > region_start && !index().frames().empty()) {
    hot_region_first_frame_ = index().frames_for_range(region_start, 1).first;
    hot_region_last_frame_ = index().frames_for_range(region_end - 1, 1).second;
  }
  described_ = std::make_unique<std::atomic<bool>[]>(index().entry_count());
  handed_ = std::make_unique<std::atomic<uint8_t>[]>(index().entry_count());
  files_by_offset_.reserve(index().entry_count());  // an upper bound: grown one by one it was 4 % of mount's CPU
  for (EntryId id = 0; id < index().entry_count(); ++id) {
    const format::Entry e = index().entry(id);
    if (e.type == format::EntryType::kRegular && e.size > 0 && e.link_group == id) files_by_offset_.push_back({e.data_offset, e.size, id});
  }
  std::sort(files_by_offset_.begin(), files_by_offset_.end(),
            [](const FileSpan& a, const FileSpan& b) { return a.data_offset < b.data_offset; });
  if (config_.decode_ahead_bytes > 0) {
    noted_ = std::make_unique<std::atomic<bool>[]>(index().entry_count());
    frame_file_bytes_.assign(index().frames().size(), 0);
    frame_noted_bytes_ = std::make_unique<std::atomic<uint64_t>[]>(index().frames().size());
    frame_decoded_ = std::make_unique<std::atomic<bool>[]>(index().frames().size());
    for (const FileSpan& f : files_by_offset_) {
      const auto [first_frame, last_frame] = index().frames_for_range(f.data_offset, f.size);
      if (first_frame == last_frame) frame_file_bytes_[first_frame] += f.size;
    }
  }
  late_thread_ = std::jthread([this](std::stop_token st) { late_hand_off_loop(st); });
}

void Filesystem::add_page_cache_sink(const void* owner, PageCacheSink sink) {
  std::unique_lock lock(sinks_mu_);
  sinks_.emplace_back(owner, std::move(sink));
  sink_count_.store(sinks_.size(), std::memory_order_relaxed);
}

void Filesystem::remove_page_cache_sink(const void* owner) {
  std::unique_lock lock(sinks_mu_);  // waits for a hand-off in progress
  std::erase_if(sinks_, [owner](const auto& s) { return s.first == owner; });
  sink_count_.store(sinks_.size(), std::memory_order_relaxed);
}

uint64_t Filesystem::known_bytes_to_hand(uint32_t frame) const {
  const format::FrameInfo& info = index().frames()[frame];
  const uint64_t begin = info.uncompressed_offset, end = begin + info.uncompressed_size;
  auto it = std::lower_bound(files_by_offset_.begin(), files_by_offset_.end(), begin,
                             [](const FileSpan& f, uint64_t offset) { return f.data_offset < offset; });
  uint64_t bytes = 0;
  for (; it != files_by_offset_.end() && it->data_offset < end && it->data_offset + it->size <= end; ++it) {
    if (described_[it->id].load(std::memory_order_relaxed) && handed_[it->id].load(std::memory_order_relaxed) == kNotHanded)
      bytes += it->size;
  }
  return bytes;
}

bool Filesystem::worth_decoding_ahead(uint32_t frame) const {
  if (sink_count_.load(std::memory_order_relaxed) == 0 || memory_.kernel_holds(frame)) return false;
  // A quarter of the frame: decoding 4 MiB to hand the kernel a few small files (the rest of the
  // frame a large file that reaches into the next one, or files nobody described yet) is not
  // worth a 2-core runner's CPU; the job's own read of them decodes the frame if it comes.
  const uint64_t size = index().frames()[frame].uncompressed_size;
  return known_bytes_to_hand(frame) >= std::max<uint64_t>(size / 4, 1);
}

bool Filesystem::fully_known(uint32_t frame) const {
  // All of them: the walk lists a directory at a time and a frame holds several; a frame decoded
  // before its last directory was listed hands off the rest only if it is still in memory when
  // they are (late hand-off), and a job that then reads one of them decodes the frame again
  // (measured with 90 %: 36-40 frames decoded ahead, 37 of them decoded again by the job).
  return frame_noted_bytes_[frame].load(std::memory_order_relaxed) >= frame_file_bytes_[frame];
}

void Filesystem::count_known(const format::Entry& e) {
  const auto [first, last] = index().frames_for_range(e.data_offset, e.size);
  if (first != last) return;
  const uint64_t before = frame_noted_bytes_[first].fetch_add(e.size, std::memory_order_relaxed);
  const uint64_t want = frame_file_bytes_[first];
  if (before >= want || before + e.size < want) return;
  if (walks_.load(std::memory_order_relaxed) > 0) {
    std::lock_guard lock(held_mu_);
    held_frames_.push_back(first);
    return;
  }
  queue_decode_ahead(first);
}

void Filesystem::walk_started() { walks_.fetch_add(1, std::memory_order_relaxed); }

void Filesystem::walk_listed() {
  std::vector<uint32_t> frames;
  {
    std::lock_guard lock(held_mu_);
    frames.swap(held_frames_);
  }
  for (uint32_t f : frames) queue_decode_ahead(f);
}

void Filesystem::walk_ended(bool finished) {
  walks_.fetch_sub(1, std::memory_order_relaxed);
  walk_listed();
  if (finished) decode_known_ahead();
}

void Filesystem::queue_decode_ahead(uint32_t frame) {
  // A frame decoded once (for a read, or ahead) handed off what was known then; the files named
  // since go late while it is in memory (note_known), and a read of the others decodes it anyway.
  // A second decode only for them would double the CPU of a job that reads the frame once.
  if (frame_decoded_[frame].load(std::memory_order_relaxed) || memory_.contains(frame) || !worth_decoding_ahead(frame)) return;
  // Only frames the fill brings anyway (or already brought, or the learned hot region's): the
  // hand-off must not fetch what `--fill` says not to.
  const bool hot = static_cast<int64_t>(frame) >= hot_region_first_frame_ && static_cast<int64_t>(frame) <= hot_region_last_frame_;
  if (frame >= fill_end_frame_.load(std::memory_order_relaxed) && !hot && !chunk_cache_->contains(index().frames()[frame].digest)) return;
  fetcher_->prefetch(frame, frame, Priority::kBackground);
}

bool Filesystem::take_decode_ahead(uint32_t frame) {
  if (frame_noted_bytes_ == nullptr || frame_decoded_[frame].load(std::memory_order_relaxed) || !fully_known(frame) ||
      !worth_decoding_ahead(frame))
    return false;
  const uint64_t size = index().frames()[frame].uncompressed_size;
  for (uint64_t cur = decode_ahead_taken_.load(std::memory_order_relaxed);;) {
    if (cur + size > config_.decode_ahead_bytes) return false;
    if (decode_ahead_taken_.compare_exchange_weak(cur, cur + size, std::memory_order_relaxed)) return true;
  }
}

void Filesystem::decode_known_ahead() {
  if (config_.decode_ahead_bytes == 0 || chunk_cache_ == nullptr) return;
  // What is known now is what the walk will make known: frames partly known count as ready.
  for (uint32_t f = 0; f < index().frames().size(); ++f) {
    frame_noted_bytes_[f].store(frame_file_bytes_[f], std::memory_order_relaxed);
  }
  for (uint32_t f = 0; f < index().frames().size(); ++f) {
    if (decode_ahead_taken_.load(std::memory_order_relaxed) >= config_.decode_ahead_bytes) return;
    queue_decode_ahead(f);
  }
}

void Filesystem::hand_to_page_cache(uint32_t frame, const FramePtr& bytes, bool ahead) {
  if (frame_decoded_ != nullptr) frame_decoded_[frame].store(true, std::memory_order_relaxed);
  std::shared_lock lock(sinks_mu_);
  if (sinks_.empty()) return;
  const format::FrameInfo& info = index().frames()[frame];
  const uint64_t begin = info.uncompressed_offset, end = begin + info.uncompressed_size;
  if (bytes->size() != info.uncompressed_size) return;
  auto it = std::lower_bound(files_by_offset_.begin(), files_by_offset_.end(), begin,
                             [](const FileSpan& f, uint64_t offset) { return f.data_offset < offset; });
  // A file that begins in an earlier frame and reaches into this one still needs the frame (its
  // straddling page, should the kernel drop a page, and readers of its pages not handed off).
  bool all_taken = true;
  if (it != files_by_offset_.begin() && std::prev(it)->data_offset + std::prev(it)->size > begin) {
    all_taken = false;
    queue_split_part(*std::prev(it), begin, end, bytes);
  }
  uint64_t taken = 0;
  bool refused = false;  // a file the kernel was told of did not go (its inode not made yet)
  for (; it != files_by_offset_.end() && it->data_offset < end; ++it) {
    if (it->data_offset + it->size > end) {  // reaches into the next frame
      all_taken = false;
      queue_split_part(*it, begin, end, bytes);
      break;
    }
    const std::span<const char> content(bytes->data() + (it->data_offset - begin), it->size);
    bool took = false;
    // A decode-ahead offers only what the kernel does not hold yet; a read's decode offers all
    // again (the kernel may have dropped the pages of the file being read).
    if (ahead && handed_[it->id].load(std::memory_order_relaxed) == kTaken) continue;
    if (described_[it->id].load(std::memory_order_relaxed)) {
      for (auto& [owner, sink] : sinks_) took = sink(it->id, 0, content) || took;  // every mount of the archive
      refused = refused || !took;
    }
    if (took) handed_[it->id].store(kTaken, std::memory_order_relaxed);
    taken += took ? 1 : 0;
    all_taken = all_taken && took;
  }
  files_to_page_cache_.fetch_add(taken, std::memory_order_relaxed);
  // Without a chunk cache a frame dropped here would cost a store read if the kernel let go of
  // a page: keep it.
  if (all_taken && taken > 0 && chunk_cache_ != nullptr) {
    memory_.hand_to_kernel(frame);
    frames_to_page_cache_.fetch_add(1, std::memory_order_relaxed);
  } else if (ahead && !refused) {
    // Decoded only for the hand-off and nobody read it: the files the kernel did not take (one
    // reaching into the next frame, one not described yet) are decoded again from the chunk
    // cache if the job reads them. Holding the frame for them would fill the budget with frames
    // a job that reads a part of the tree never asks for. Kept when the kernel refused a file it
    // was told of: a reply naming it had been sent but the kernel had not made its inode yet (a
    // decode right behind the walk's listing), and the file's open hands it off late from here.
    memory_.drop(frame);
  }
}

void Filesystem::queue_split_part(const FileSpan& f, uint64_t begin, uint64_t end, const FramePtr& bytes) {
  if (!described_[f.id].load(std::memory_order_relaxed)) return;
  split_hand_offs_.push(bytes->size(), [this, f, begin, end, bytes] { hand_split_part(f, begin, end, bytes); });
}

bool Filesystem::reading(uint64_t begin, uint64_t end) {
  std::lock_guard lock(ops_mu_);
  for (const auto& [id, weak] : ops_) {
    const std::shared_ptr<ReadOp> op = weak.lock();
    if (op != nullptr && op->stream_offset < end && begin < op->stream_offset + op->length) return true;
  }
  return false;
}

void Filesystem::hand_split_part(const FileSpan& f, uint64_t begin, uint64_t end, const FramePtr& bytes) {
  // Not while a READ of the file is unanswered: the kernel holds that READ's pages locked until
  // the daemon answers, a store into them waits uninterruptibly, and a daemon killed meanwhile
  // could never exit (its own thread would hold /dev/fuse open; seen in kill9_test). That READ
  // brings its pages itself.
  if (reading(f.data_offset, f.data_offset + f.size)) return;
  std::shared_lock lock(sinks_mu_);
  if (sinks_.empty()) return;
  const uint64_t from = std::max(begin, f.data_offset), to = std::min(end, f.data_offset + f.size);
  const std::span<const char> part(bytes->data() + (from - begin), to - from);
  const size_t taken = split_pages_.add(f.id, f.size, from - f.data_offset, part, [&](uint64_t offset, std::span<const char> piece) {
    bool took = false;
    for (auto& [owner, sink] : sinks_) took = sink(f.id, offset, piece) || took;
    return took;
  });
  split_pieces_to_page_cache_.fetch_add(taken, std::memory_order_relaxed);
}

void Filesystem::note_known(EntryId id) {
  if (id >= index().entry_count()) return;
  const format::Entry e = index().entry(id);
  if (e.type != format::EntryType::kRegular || e.size == 0 || e.link_group != id) return;
  described_[id].store(true, std::memory_order_relaxed);  // a later decode offers it too
  if (noted_ != nullptr && chunk_cache_ != nullptr && !noted_[id].exchange(true, std::memory_order_relaxed)) count_known(e);
  if (handed_[id].load(std::memory_order_relaxed) != kNotHanded) return;
  const auto [first, last] = index().frames_for_range(e.data_offset, e.size);
  if (first != last || !memory_.contains(first)) return;  // spans frames, or its frame is gone
  {
    std::shared_lock lock(sinks_mu_);
    if (sinks_.empty()) return;
  }
  uint8_t expected = kNotHanded;
  if (!handed_[id].compare_exchange_strong(expected, kQueued, std::memory_order_relaxed)) return;
  {
    std::lock_guard lock(late_mu_);
    late_queue_.push_back(id);
    ++late_pending_;
  }
  late_cv_.notify_one();
}

void Filesystem::late_hand_off_loop(std::stop_token stop) {
  std::vector<EntryId> batch;
  while (!stop.stop_requested()) {
    {
      std::unique_lock lock(late_mu_);
      if (!late_cv_.wait(lock, stop, [this] { return !late_queue_.empty(); })) return;
      batch.swap(late_queue_);
    }
    for (EntryId id : batch) hand_off_late(id);
    {
      std::lock_guard lock(late_mu_);
      late_pending_ -= batch.size();
    }
    late_done_cv_.notify_all();
    batch.clear();
  }
}

void Filesystem::wait_late_hand_offs() {
  split_hand_offs_.wait_idle();
  std::unique_lock lock(late_mu_);
  late_done_cv_.wait(lock, [this] { return late_pending_ == 0 || late_thread_.get_stop_token().stop_requested(); });
}

void Filesystem::hand_off_late(EntryId id) {
  const format::Entry e = index().entry(id);
  const uint32_t frame = index().frames_for_range(e.data_offset, e.size).first;
  const FramePtr bytes = memory_.peek(frame);
  const format::FrameInfo& info = index().frames()[frame];
  bool took = false;
  if (bytes != nullptr && bytes->size() == info.uncompressed_size) {
    const std::span<const char> content(bytes->data() + (e.data_offset - info.uncompressed_offset), e.size);
    std::shared_lock lock(sinks_mu_);
    for (auto& [owner, sink] : sinks_) took = sink(id, 0, content) || took;
  }
  // Not taken (the frame went, a writable mount's gate refused it, or the kernel had not made
  // the inode yet: a lookup's reply is sent before the kernel's thread instantiates it): a later
  // open tries again.
  handed_[id].store(took ? kTaken : kNotHanded, std::memory_order_relaxed);
  if (!took) return;
  files_to_page_cache_.fetch_add(1, std::memory_order_relaxed);
  files_to_page_cache_late_.fetch_add(1, std::memory_order_relaxed);
  // As after a decode: without a chunk cache a dropped frame would cost a store read.
  if (chunk_cache_ != nullptr && frame_wholly_taken(frame) && memory_.contains(frame)) {
    memory_.hand_to_kernel(frame);
    frames_to_page_cache_.fetch_add(1, std::memory_order_relaxed);
  }
}

bool Filesystem::frame_wholly_taken(uint32_t frame) const {
  const format::FrameInfo& info = index().frames()[frame];
  const uint64_t begin = info.uncompressed_offset, end = begin + info.uncompressed_size;
  auto it = std::lower_bound(files_by_offset_.begin(), files_by_offset_.end(), begin,
                             [](const FileSpan& f, uint64_t offset) { return f.data_offset < offset; });
  if (it != files_by_offset_.begin() && std::prev(it)->data_offset + std::prev(it)->size > begin) return false;
  bool any = false;
  for (; it != files_by_offset_.end() && it->data_offset < end; ++it) {
    if (it->data_offset + it->size > end || handed_[it->id].load(std::memory_order_relaxed) != kTaken) return false;
    any = true;
  }
  return any;
}

Filesystem::~Filesystem() {
  split_hand_offs_.stop();
  late_thread_.request_stop();
  late_cv_.notify_all();
  if (late_thread_.joinable()) late_thread_.join();
  watchdog_.request_stop();
  ops_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  fetcher_.reset();  // joins fetch threads; reads still waiting get kCancelled through finish()
  if (chunk_cache_ != nullptr) ignore_error(chunk_cache_->flush(), "LRU hints only");
}

EntryId Filesystem::canonical(EntryId id) const {
  if (id >= index().entry_count()) return id;
  format::Entry e = index().entry(id);
  return e.type == format::EntryType::kRegular ? e.link_group : id;
}

Result<Attr> Filesystem::getattr(EntryId id) const {
  if (id >= index().entry_count()) return Status(ErrorCode::kNotFound, "no entry " + std::to_string(id));
  const format::Entry e = index().entry(canonical(id));
  described_[e.id].store(true, std::memory_order_relaxed);  // the page-cache hand-off's candidates
  Attr a;
  a.mtime_ns = e.mtime_ns;
  a.uid = config_.owner ? config_.owner->first : e.uid;
  a.gid = config_.owner ? config_.owner->second : e.gid;
  switch (e.type) {
    case format::EntryType::kDirectory: {
      a.mode = S_IFDIR | (e.mode & 07777);
      // 2 + subdirectories, as on disk: find's leaf optimisation trusts this count.
      auto kids = index().children(id);
      uint32_t subdirs = 0;
      for (uint32_t i = 0; i < kids.count; ++i) {
        if (index().entry(kids.first + i).type == format::EntryType::kDirectory) ++subdirs;
      }
      a.nlink = 2 + subdirs;
      a.size = 0;
      break;
    }
    case format::EntryType::kSymlink:
      a.mode = S_IFLNK | 0777;
      a.size = e.symlink_target.size();
      break;
    case format::EntryType::kRegular:
      a.mode = S_IFREG | (e.mode & 07777);
      a.nlink = std::max<uint32_t>(1, e.nlink);
      a.size = e.size;
      break;
  }
  return a;
}

Result<EntryId> Filesystem::lookup(EntryId dir, std::string_view name) const {
  LC_ASSIGN_OR_RETURN(auto kids, children(dir));
  (void)kids;
  auto id = index().lookup(dir, name);
  if (!id) return Status(ErrorCode::kNotFound, std::string(name) + " not found");
  return canonical(*id);
}

Result<format::Index::ChildRange> Filesystem::children(EntryId dir) const {
  if (dir >= index().entry_count()) return Status(ErrorCode::kNotFound, "no entry " + std::to_string(dir));
  if (index().entry(dir).type != format::EntryType::kDirectory) {
    return Status(ErrorCode::kInvalidArgument, index().path(dir) + " is not a directory");
  }
  return index().children(dir);
}

Result<std::string> Filesystem::readlink(EntryId id) const {
  if (id >= index().entry_count()) return Status(ErrorCode::kNotFound, "no entry " + std::to_string(id));
  const format::Entry e = index().entry(id);
  if (e.type != format::EntryType::kSymlink) return Status(ErrorCode::kInvalidArgument, index().path(id) + " is not a symlink");
  return std::string(e.symlink_target);
}

Result<std::optional<std::string>> Filesystem::getxattr(EntryId id, std::string_view name) const {
  if (id >= index().entry_count()) return Status(ErrorCode::kNotFound, "no entry " + std::to_string(id));
  if (!index().entry(id).has_xattrs) return std::optional<std::string>();
  for (auto& x : index().xattrs(id)) {
    if (x.name == name) return std::optional<std::string>(std::move(x.value));
  }
  return std::optional<std::string>();
}

Result<std::vector<std::string>> Filesystem::listxattr(EntryId id) const {
  if (id >= index().entry_count()) return Status(ErrorCode::kNotFound, "no entry " + std::to_string(id));
  std::vector<std::string> names;
  if (!index().entry(id).has_xattrs) return names;
  for (auto& x : index().xattrs(id)) names.push_back(std::move(x.name));
  return names;
}

StatfsInfo Filesystem::statfs() const {
  StatfsInfo s;
  s.blocks = (index().totals().file_bytes + s.block_size - 1) / s.block_size;
  s.files = index().entry_count();
  return s;
}

Result<uint64_t> Filesystem::open(EntryId id, int open_flags) {
  if (id >= index().entry_count()) return Status(ErrorCode::kNotFound, "no entry " + std::to_string(id));
  if ((open_flags & O_ACCMODE) != O_RDONLY) return Status(ErrorCode::kPermissionDenied, "read-only mount");
  id = canonical(id);
  const format::Entry e = index().entry(id);
  if (e.type != format::EntryType::kRegular) return Status(ErrorCode::kInvalidArgument, index().path(id) + " is not a regular file");
  auto file = std::make_unique<OpenFile>();
  file->id = id;
  file->data_offset = e.data_offset;
  file->size = e.size;
  file->first_frame = e.size > 0 ? index().frames_for_range(e.data_offset, 1).first : 0;
  file->policy = ReadAheadPolicy(config_.readahead);
  note_open(id);
  open_handles_.fetch_add(1, std::memory_order_relaxed);
  return reinterpret_cast<uint64_t>(file.release());
}

void Filesystem::note_open(EntryId id) {
  if (id >= index().entry_count()) return;
  id = canonical(id);
  const format::Entry e = index().entry(id);
  if (e.type != format::EntryType::kRegular) return;
  bool first_in_dir = false;
  {
    std::lock_guard lock(access_mu_);
    if (!opened_[id]) {
      opened_[id] = true;
      access_order_.push_back(id);
    }
    // A directory's bit: its files' frames were queued (directories are never opened as files).
    if (e.parent < opened_.size() && !opened_[e.parent]) first_in_dir = opened_[e.parent] = true;
  }
  if (first_in_dir) prefetch_directory(e);
  files_opened_.fetch_add(1, std::memory_order_relaxed);
}

void Filesystem::release(uint64_t handle) {
  delete reinterpret_cast<OpenFile*>(handle);
  open_handles_.fetch_sub(1, std::memory_order_relaxed);
}

void Filesystem::finish(const std::shared_ptr<ReadOp>& op, Result<std::vector<ReadPiece>> result) {
  if (op->done.exchange(true)) return;
  {
    std::lock_guard lock(ops_mu_);
    ops_.erase(op->id);
  }
  if (result.ok()) {
    bytes_served_.fetch_add(op->length, std::memory_order_relaxed);
  } else {
    read_errors_.fetch_add(1, std::memory_order_relaxed);
    if (result.error().code() == ErrorCode::kTimeout && op->file_failure != nullptr) {
      op->file_failure->record(op->first_frame, op->last_frame, result.error(), fetcher_->counters().frames_from_store.load());
    }
  }
  ReadCallback cb = std::move(op->cb);
  cb(std::move(result));
}

void Filesystem::read(uint64_t handle, uint64_t offset, size_t size, ReadCallback cb) {
  auto* file = reinterpret_cast<OpenFile*>(handle);
  reads_.fetch_add(1, std::memory_order_relaxed);
  last_read_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  if (offset >= file->size || size == 0) {
    cb(std::vector<ReadPiece>());
    return;
  }
  const uint64_t length = std::min<uint64_t>(size, file->size - offset);
  const uint64_t data_offset = file->data_offset;
  const auto [first, last] = index().frames_for_range(data_offset + offset, length);
  if (config_.read_timeout_ms > 0) {
    if (auto again = file->failure->repeat_for(first, last, std::chrono::milliseconds(config_.read_timeout_ms),
                                               fetcher_->counters().frames_from_store.load())) {
      read_errors_.fetch_add(1, std::memory_order_relaxed);
      cb(*again);  // the kernel retrying the read that just failed (RecentFailure)
      return;
    }
  }
  FileRange ahead;
  uint32_t behind_from = 0, behind_to = 0;  // frames [from, to) to drop behind a streaming reader
  {
    std::lock_guard lock(file->mu);
    ahead = file->policy.on_read(offset, length, file->size);
    // Drop-behind (issue 15, memory): a file read sequentially past frames that hold nothing
    // else (the interior of a file larger than a frame) needs them no more: the kernel's page
    // cache has what the replies carried. Without this a few large files filled the budget
    // with frames nobody reads again (mixed fixture: 255 MiB peak). One frame behind the read
    // stays: the kernel's concurrent readahead requests arrive a little out of order.
    if (file->policy.window_bytes() > config_.readahead.initial_window_bytes && first > file->first_frame + 2) {
      behind_from = std::max(file->dropped_behind, file->first_frame + 1);
      behind_to = first - 1;
      file->dropped_behind = std::max(file->dropped_behind, behind_to);
    }
  }
  for (uint32_t f = behind_from; f < behind_to; ++f) memory_.drop(f);
  auto op = std::make_shared<ReadOp>();
  // `file` may be released (and freed) as soon as get_range() below has replied: nothing after
  // that call may touch it.
  op->stream_offset = data_offset + offset;
  op->length = static_cast<size_t>(length);
  op->deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.read_timeout_ms);
  op->cb = std::move(cb);
  op->file_failure = file->failure;
  op->first_frame = first;
  op->last_frame = last;
  op->frames.resize(last - first + 1);
  op->remaining = op->frames.size();
  {
    std::lock_guard lock(ops_mu_);
    op->id = next_op_++;
    ops_.emplace(op->id, op);
  }
  const auto frames = index().frames();
  fetcher_->get_range(first, last, Priority::kOnDemand, [this, op, frames](uint32_t f, Result<FetchedFrame> r) {
    bool last_one = false;
    {
      std::lock_guard lock(op->mu);
      if (r.ok()) {
        op->frames[f - op->first_frame] = std::move(r).value();
      } else if (op->error.ok()) {
        op->error = r.error();
      }
      last_one = --op->remaining == 0;
    }
    if (!last_one) return;
    if (!op->error.ok()) {
      finish(op, op->error);
      return;
    }
    std::vector<ReadPiece> pieces;
    const uint64_t end = op->stream_offset + op->length;
    for (size_t i = 0; i < op->frames.size(); ++i) {
      const format::FrameInfo& info = frames[op->first_frame + i];
      const uint64_t from = std::max(op->stream_offset, info.uncompressed_offset);
      const uint64_t to = std::min<uint64_t>(end, info.uncompressed_offset + info.uncompressed_size);
      auto piece = to > from ? piece_of(op->frames[i], from - info.uncompressed_offset, to - from)
                             : Result<ReadPiece>(Status(ErrorCode::kCorrupt, "does not cover the read"));
      if (!piece.ok()) {
        finish(op, piece.error().with_context("frame " + std::to_string(op->first_frame + i)));
        return;
      }
      pieces.push_back(std::move(piece).value());
    }
    finish(op, std::move(pieces));
  });
  if (ahead.length > 0) {
    const auto [a, b] = index().frames_for_range(data_offset + ahead.offset, ahead.length);
    fetcher_->prefetch(a, b, Priority::kReadahead);
  }
  FrameSpan across;
  {
    std::lock_guard lock(archive_ahead_mu_);
    const bool in_hot_region = hot_region_last_frame_ >= 0 && first >= hot_region_first_frame_ && last <= hot_region_last_frame_;
    const auto limit = in_hot_region ? static_cast<uint32_t>(hot_region_last_frame_ + 1) : static_cast<uint32_t>(frames.size());
    across = archive_ahead_.on_read(first, last, limit);
  }
  if (across.count > 0) fetcher_->prefetch(across.first, across.first + across.count - 1, Priority::kReadahead);
}

Result<std::string> Filesystem::read_sync(uint64_t handle, uint64_t offset, size_t size) {
  std::promise<Result<std::vector<ReadPiece>>> done;
  auto fut = done.get_future();
  read(handle, offset, size, [&done](Result<std::vector<ReadPiece>> r) { done.set_value(std::move(r)); });
  auto r = fut.get();
  if (!r.ok()) return r.error();
  std::string out;
  for (const ReadPiece& p : *r) out.append(p.frame->data() + p.offset, p.length);
  return out;
}

void Filesystem::watchdog(std::stop_token stop) {
  while (!stop.stop_requested()) {
    std::vector<std::shared_ptr<ReadOp>> expired;
    {
      std::unique_lock lock(ops_mu_);
      ops_cv_.wait_for(lock, stop, std::chrono::milliseconds(100), [] { return false; });
      const auto now = std::chrono::steady_clock::now();
      for (auto& [id, weak] : ops_) {
        if (auto op = weak.lock(); op && op->deadline <= now) expired.push_back(std::move(op));
      }
    }
    trim_if_idle();
    for (auto& op : expired) {
      read_timeouts_.fetch_add(1, std::memory_order_relaxed);
      std::cerr << "lazycache: read of " << op->length << " bytes at stream offset " << op->stream_offset << " of "
                << reader_->source().describe() << " timed out after " << config_.read_timeout_ms << " ms\n";
      finish(op, Status(ErrorCode::kTimeout, "read timed out"));
    }
  }
}

void Filesystem::trim_if_idle() {
  if (config_.idle_trim_ms == 0 || (memory_.held_bytes() == 0 && fetcher_->buffers_kept() == 0) || !fetcher_->idle()) return;
  const auto last = std::chrono::steady_clock::time_point(
      std::chrono::steady_clock::duration(last_read_ns_.load(std::memory_order_relaxed)));
  if (std::chrono::steady_clock::now() - last < std::chrono::milliseconds(config_.idle_trim_ms)) return;
  const uint64_t frames = memory_.clear();  // first: their buffers go back to the free list
  if (frames + fetcher_->trim_buffers() > 0) ::malloc_trim(0);
}

void Filesystem::prefetch_directory(const format::Entry& opened) {
  if (config_.directory_prefetch_frames == 0 || opened.size == 0) return;
  const uint32_t at = index().frames_for_range(opened.data_offset, 1).first;
  // The learned hot region holds the files the job reads; their directories' other files lie
  // elsewhere, and fetching them is what the learned run must not pay for.
  if (hot_region_last_frame_ >= 0 && at >= hot_region_first_frame_ && at <= hot_region_last_frame_) return;
  const auto kids = index().children(opened.parent);
  uint32_t first = at, last = at;
  for (uint32_t i = 0; i < kids.count; ++i) {
    const format::Entry k = index().entry(kids.first + i);
    if (k.type != format::EntryType::kRegular || k.size == 0 || canonical(k.id) != k.id) continue;
    const auto [a, b] = index().frames_for_range(k.data_offset, k.size);
    first = std::min(first, a);
    last = std::max(last, b);
  }
  // A directory larger than that is not a package a job loads whole (a lib/ of big files, a
  // flat directory of thousands): one file of it says little about the rest.
  if (last - first + 1 > config_.directory_prefetch_frames) return;
  if (last > first) fetcher_->prefetch(first, last, Priority::kReadahead);
}

void Filesystem::prefetch_file(const format::Entry& e, Priority p) {
  if (e.type != format::EntryType::kRegular || e.size == 0) return;
  const auto [a, b] = index().frames_for_range(e.data_offset, e.size);
  fetcher_->prefetch(a, b, p);
}

size_t Filesystem::start_prefetch(PrefetchMode mode, const std::vector<std::string>& paths) {
  size_t missing = 0;
  for (const std::string& path : paths) {
    auto id = index().lookup_path(path);
    if (!id) {
      ++missing;
      continue;
    }
    std::vector<EntryId> stack{*id};  // a directory means everything below it
    while (!stack.empty()) {
      const format::Entry e = index().entry(stack.back());
      stack.pop_back();
      if (e.type == format::EntryType::kDirectory) {
        auto kids = index().children(e.id);
        for (uint32_t i = kids.count; i > 0; --i) stack.push_back(kids.first + i - 1);
      } else {
        prefetch_file(index().entry(canonical(e.id)), Priority::kPrefetch);
      }
    }
  }
  if (mode == PrefetchMode::kNone) return missing;
  for (EntryId id : index().hot_list()) {
    if (id < index().entry_count()) prefetch_file(index().entry(canonical(id)), Priority::kPrefetch);
  }
  const auto frames = index().frames();
  uint64_t target = mode == PrefetchMode::kAll
                        ? (chunk_cache_ != nullptr ? reader_->source().size() : 0)
                        : config_.fill.target_bytes(reader_->source().size(), config_.cache_bound_bytes, chunk_cache_ != nullptr);
  // A learned layout already says what the job reads: under `auto` the hot list is the fill.
  // Filling the rest competes with the job's own misses for the link (node, hosted: the learned
  // run fetched 33.5 MiB instead of 6.7 and its overhead went from 0.65 s to 1.47 s).
  if (mode == PrefetchMode::kHotList && config_.fill.mode == FillPolicy::Mode::kAuto && !index().hot_list().empty()) target = 0;
  // Archive order: the order a job walking the tree reads, and the order readahead across files
  // follows; frames already cached cost a chunk-cache lookup on a fetch thread, no store read.
  // The target reported is what is queued: data frames only (the policy's byte figure counts the
  // whole archive, index included, which no fill fetches).
  uint32_t last = 0;
  uint64_t covered = 0;
  for (; last < frames.size() && covered < target; ++last) covered += frames[last].compressed_size;
  fill_target_bytes_.store(covered, std::memory_order_relaxed);
  fill_end_frame_.store(last, std::memory_order_relaxed);
  if (last > 0) fetcher_->prefetch(0, last - 1, Priority::kBackground);
  return missing;
}

MountStats Filesystem::stats() const {
  MountStats s;
  const FetchCounters& c = fetcher_->counters();
  s.archive_bytes = reader_->source().size();
  s.archive_frames = index().frames().size();
  s.mount_range_reads = config_.mount_range_reads;
  s.store_range_reads = c.store_range_reads.load();
  s.store_bytes = c.store_bytes.load();
  s.frames_from_store = c.frames_from_store.load();
  s.frames_from_chunk_cache = c.frames_from_chunk_cache.load();
  s.frames_from_memory = c.frames_from_memory.load();
  s.prefetched_frames = c.prefetched_frames.load();
  s.fill_target_bytes = fill_target_bytes_.load(std::memory_order_relaxed);
  s.fill_bytes = c.fill_bytes.load();
  s.frames_pending = fetcher_->pending();
  s.on_demand_bytes = s.store_bytes - std::min(s.store_bytes, s.fill_bytes);
  s.chunk_cache_bad = c.chunk_cache_bad.load();
  s.frames_spilled = c.frames_spilled.load();
  s.frames_decoded = c.frames_decoded.load();
  s.readahead_stored = c.readahead_stored.load();
  s.frames_decoded_ahead = c.frames_decoded_ahead.load();
  s.decode_ahead_bytes = decode_ahead_taken_.load(std::memory_order_relaxed);
  s.files_to_page_cache = files_to_page_cache_.load(std::memory_order_relaxed);
  s.frames_to_page_cache = frames_to_page_cache_.load(std::memory_order_relaxed);
  s.files_to_page_cache_late = files_to_page_cache_late_.load(std::memory_order_relaxed);
  s.split_pieces_to_page_cache = split_pieces_to_page_cache_.load(std::memory_order_relaxed);
  s.fetch_errors = c.fetch_errors.load();
  s.files_opened = files_opened_.load();
  s.open_handles = open_handles_.load();
  s.reads = reads_.load();
  s.bytes_served = bytes_served_.load();
  s.read_errors = read_errors_.load();
  s.read_timeouts = read_timeouts_.load();
  s.memory_used_bytes = budget_.used();
  s.memory_budget_bytes = budget_.limit();
  s.memory_peak_bytes = budget_.peak();
  s.uptime_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  return s;
}

size_t Filesystem::reads_in_flight() {
  std::lock_guard lock(ops_mu_);
  return ops_.size();
}

std::vector<EntryId> Filesystem::access_order() const {
  std::lock_guard lock(access_mu_);
  return access_order_;
}

}  // namespace lazycache::fs
