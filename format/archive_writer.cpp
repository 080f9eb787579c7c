// SPDX-License-Identifier: MIT
// write_archive(): scan -> producer thread (tar + frame cuts) -> compression workers -> the
// calling thread writing frames in order, then the index frame and the seek table.
#include "format/archive_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "format/archive_tail.h"
#include "format/dir_repeats.h"
#include "format/file_data.h"
#include "format/frame_codec.h"
#include "format/fs_util.h"
#include "format/hashing.h"
#include "format/index_builder.h"
#include "format/pack_order.h"
#include "format/seek_table.h"
#include "format/tar.h"
#include "format/tree_scan.h"

namespace lazycache::format {

namespace {

constexpr uint64_t kMinFrameBytes = 4096;
// Frames may overshoot the target by a quarter plus headers; 512 MiB keeps every frame far
// below the 1 GiB per-frame limit readers enforce.
constexpr uint64_t kMaxFrameTargetBytes = 512ull << 20;

struct FrameJob {
  uint64_t seq = 0;
  std::string data;
};

struct FrameDone {
  std::string compressed;
  uint32_t uncompressed_size = 0;
  uint32_t xxh64_low32 = 0;
};

// The shared state of the pipeline. Lock order: only mu_ exists.
class Pipeline {
 public:
  explicit Pipeline(size_t max_inflight) : max_inflight_(max_inflight) {}

  // Producer: blocks while too many frames are alive. False once the pipeline failed.
  bool push(FrameJob job) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return inflight_ < max_inflight_ || !error_.ok(); });
    if (!error_.ok()) return false;
    ++inflight_;
    ++produced_;
    todo_.push_back(std::move(job));
    cv_.notify_all();
    return true;
  }
  void producer_finished() {
    std::lock_guard lock(mu_);
    producer_done_ = true;
    cv_.notify_all();
  }
  // Worker: next job, or nullopt when there is nothing left to do.
  std::optional<FrameJob> pop() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !todo_.empty() || producer_done_ || !error_.ok(); });
    if (todo_.empty() || !error_.ok()) return std::nullopt;
    FrameJob j = std::move(todo_.front());
    todo_.pop_front();
    return j;
  }
  void complete(uint64_t seq, FrameDone done) {
    std::lock_guard lock(mu_);
    done_.emplace(seq, std::move(done));
    cv_.notify_all();
  }
  // Writer: frame `seq` when ready; nullopt at the end or on error (see error()).
  std::optional<FrameDone> take(uint64_t seq) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_.count(seq) || (producer_done_ && seq == produced_) || !error_.ok(); });
    if (!error_.ok() || !done_.count(seq)) return std::nullopt;
    FrameDone d = std::move(done_[seq]);
    done_.erase(seq);
    --inflight_;
    cv_.notify_all();
    return d;
  }
  void fail(Status s) {
    std::lock_guard lock(mu_);
    if (error_.ok()) error_ = std::move(s);
    cv_.notify_all();
  }
  Status error() {
    std::lock_guard lock(mu_);
    return error_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const size_t max_inflight_;
  size_t inflight_ = 0;                 // guarded by mu_: produced and not yet written
  uint64_t produced_ = 0;               // guarded by mu_
  bool producer_done_ = false;          // guarded by mu_
  std::deque<FrameJob> todo_;           // guarded by mu_
  std::map<uint64_t, FrameDone> done_;  // guarded by mu_
  Status error_;                        // guarded by mu_
};

// Builds the tar stream and cuts it into frames. Runs on its own thread; touches the
// ScannedTree nodes (data_offset, digests, hardlink groups) that nobody else reads until join.
class Producer {
 public:
  Producer(ScannedTree& tree, const PackConfig& config, Pipeline& pipe, std::vector<uint32_t> order)
      : tree_(tree), nodes_(tree.model.nodes), config_(config), pipe_(pipe), order_(std::move(order)), target_(config.frame_size_bytes) {
    reserve_frame();
  }

  std::atomic<uint64_t> files_done{0}, bytes_in{0};
  uint64_t stream_bytes = 0, hardlinks = 0;
  std::vector<IndexDeadSpec> dead;  // superseded members, in stream order

  void run() {
    Status s = produce();
    if (!s.ok()) pipe_.fail(s);
    pipe_.producer_finished();
  }

 private:
  std::string member_path(uint32_t id) const {
    std::vector<const std::string*> parts;
    for (uint32_t n = id; n != 0; n = nodes_[n].parent) parts.push_back(&nodes_[n].name);
    std::string out;
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
      if (!out.empty()) out += '/';
      out += **it;
    }
    return out;
  }

  // A frame ends near target_ + target_/4 plus one header; reserving that up front keeps the
  // buffer from regrowing (each regrowth copies the frame and faults in fresh pages: a fifth of
  // pack's CPU time on a node_modules tree before this).
  void reserve_frame() {
    cur_ = std::string();
    cur_.reserve(static_cast<size_t>(target_ + target_ / 4 + (64 << 10)));
  }

  Status flush() {
    if (cur_.empty()) return Status();
    FrameJob job{seq_++, std::move(cur_)};
    reserve_frame();
    if (!pipe_.push(std::move(job))) return pipe_.error();
    return Status();
  }

  void append(std::string_view bytes) {
    cur_.append(bytes);
    stream_bytes += bytes.size();
  }

  Status write_file_data(uint32_t id) {
    IndexNode& n = nodes_[id];
    const std::string what = member_path(id);
    LC_ASSIGN_OR_RETURN(Fd fd, opener_.open(id, what));
    auto consumed = [&](uint64_t chunk) {
      stream_bytes += chunk;
      bytes_in += chunk;
    };
    LC_ASSIGN_OR_RETURN(FileData data, append_file_data(
                                           fd.get(), n.size, target_, cur_, [&] { return flush(); }, consumed, what));
    if (data.size_changed)
      config_.warn("file " + what + " changed size while being packed; archived as its first " + std::to_string(n.size) +
                   " bytes (zero-padded if it shrank)");
    n.content_digest = data.digest;
    append(std::string(tar_padding(n.size), '\0'));
    return Status();
  }

  Status write_member(uint32_t id) {
    IndexNode& n = nodes_[id];
    std::optional<std::string> target;  // set for a hardlink member
    bool data = false;
    if (n.type == EntryType::kRegular) {
      auto key = tree_.dev_ino[id];
      auto it = tree_.stat_nlink[id] > 1 ? leaders_.find(key) : leaders_.end();
      if (it != leaders_.end()) {
        target = member_path(it->second);
        n.link_group = it->second;
        ++hardlinks;
      } else {
        if (tree_.stat_nlink[id] > 1) leaders_.emplace(key, id);
        data = true;
      }
    }
    TarMember m = node_tar_member(n, member_path(id), target ? &*target : nullptr);
    const std::string header = tar_header_bytes(m);
    // A directory written again at the end (format/dir_repeats.h): its first member is dead.
    if (n.member_offset != kNoMemberOffset) dead.push_back(IndexDeadSpec{n.member_offset, header.size(), id});
    n.member_offset = stream_bytes;
    append(header);
    if (data) {
      n.data_offset = stream_bytes;
      LC_RETURN_IF_ERROR(write_file_data(id));
      ++files_done;
    }
    if (cur_.size() >= target_) LC_RETURN_IF_ERROR(flush());
    return Status();
  }

  Status produce() {
    for (uint32_t id : order_) LC_RETURN_IF_ERROR(write_member(id));
    // The end-of-archive blocks get a frame of their own, so every frame before them ends on a
    // member boundary and a later incremental save can copy the last one too.
    LC_RETURN_IF_ERROR(flush());
    append(tar_end_blocks());
    LC_RETURN_IF_ERROR(flush());
    // Hardlink members share their leader's data; nlink counts the names in the archive.
    share_hardlink_data(nodes_, order_);
    return Status();
  }

  ScannedTree& tree_;
  std::vector<IndexNode>& nodes_;
  const PackConfig& config_;
  Pipeline& pipe_;
  std::vector<uint32_t> order_;
  const uint64_t target_;
  std::string cur_;
  uint64_t seq_ = 0;
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> leaders_;
  TreeFileOpener opener_{tree_};
};

}  // namespace

Result<PackStats> write_archive(const std::vector<PackRoot>& roots, ByteSink& sink, const PackConfig& config_in) {
  auto start = std::chrono::steady_clock::now();
  PackConfig config = config_in;
  if (!config.warn) config.warn = [](const std::string& m) { std::cerr << "lazycache: warning: " << m << "\n"; };
  if (config.frame_size_bytes < kMinFrameBytes || config.frame_size_bytes > kMaxFrameTargetBytes)
    return Status(ErrorCode::kInvalidArgument, "frame size must be between 4 KiB and 512 MiB");
  if (config.level < 1 || config.level > 22) return Status(ErrorCode::kInvalidArgument, "zstd level must be between 1 and 22");
  int threads = config.threads > 0 ? config.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  LC_ASSIGN_OR_RETURN(ScannedTree tree, scan_for_pack(roots, config.xattrs, config.warn));
  auto& nodes = tree.model.nodes;
  std::vector<uint32_t> hot = resolve_hot_paths(tree.model, config.hot_paths);

  PackProgress progress;
  for (const auto& n : nodes)
    if (n.type == EntryType::kRegular) {
      ++progress.files_total;
      progress.bytes_in_total += n.size;
    }

  Pipeline pipe(static_cast<size_t>(2 * threads + 2));
  std::vector<uint32_t> order = member_order(tree.model, hot);
  for (uint32_t dir : directories_to_repeat(nodes, order)) order.push_back(dir);
  Producer producer(tree, config, pipe, std::move(order));
  std::vector<FrameInfo> frames;
  uint64_t compressed_offset = 0, uncompressed_offset = 0;
  Status write_status;
  {
    std::vector<std::jthread> workers;
    workers.emplace_back([&] { producer.run(); });
    for (int i = 0; i < threads; ++i)
      workers.emplace_back([&] {
        while (auto job = pipe.pop()) {
          auto bytes = std::as_bytes(std::span<const char>(job->data));
          auto compressed = compress_frame(bytes, config.level);
          if (!compressed.ok()) {
            pipe.fail(compressed.error());
            return;
          }
          pipe.complete(job->seq, FrameDone{std::move(compressed).value(), static_cast<uint32_t>(job->data.size()), xxh64_low32(bytes)});
        }
      });
    for (uint64_t seq = 0;; ++seq) {
      auto done = pipe.take(seq);
      if (!done) break;
      auto cbytes = std::as_bytes(std::span<const char>(done->compressed));
      FrameInfo f;
      f.compressed_offset = compressed_offset;
      f.compressed_size = static_cast<uint32_t>(cbytes.size());
      f.uncompressed_offset = uncompressed_offset;
      f.uncompressed_size = done->uncompressed_size;
      f.xxh64_low32 = done->xxh64_low32;
      f.digest = xxh3_128(cbytes);
      Status s = sink.write(cbytes);
      if (!s.ok()) {
        write_status = s.with_context("writing frame " + std::to_string(seq));
        pipe.fail(write_status);
        break;
      }
      compressed_offset += f.compressed_size;
      uncompressed_offset += f.uncompressed_size;
      frames.push_back(f);
      if (config.progress) {
        progress.files_done = producer.files_done;
        progress.bytes_in = producer.bytes_in;
        progress.bytes_out = compressed_offset;
        config.progress(progress);
      }
    }
  }  // joins the producer and the workers
  LC_RETURN_IF_ERROR(write_status);
  LC_RETURN_IF_ERROR(pipe.error());

  PackStats stats;
  IndexModel& model = tree.model;
  model.frames = frames;
  model.hot_nodes = hot;
  model.dead = producer.dead;
  model.tool_version = config.tool_version;
  LC_ASSIGN_OR_RETURN(uint64_t tail_bytes, finish_archive(model, sink, config.level));

  stats.files = model.totals.file_count - producer.hardlinks;
  stats.dirs = model.totals.dir_count;
  stats.symlinks = model.totals.symlink_count;
  stats.hardlinks = producer.hardlinks;
  stats.skipped = tree.skipped;
  stats.file_bytes = model.totals.file_bytes;
  stats.uncompressed_bytes = uncompressed_offset;
  stats.archive_bytes = compressed_offset + tail_bytes;
  stats.frames = static_cast<uint32_t>(frames.size());
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (config.progress) {
    progress.files_done = producer.files_done;
    progress.bytes_in = producer.bytes_in;
    progress.bytes_out = stats.archive_bytes;
    config.progress(progress);
  }
  return stats;
}

}  // namespace lazycache::format
