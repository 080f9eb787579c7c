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
#include <thread>

#include "format/frame_codec.h"
#include "format/fs_util.h"
#include "format/hashing.h"
#include "format/index_builder.h"
#include "format/seek_table.h"
#include "format/tar.h"
#include "format/tree_scan.h"

namespace lazycache::format {

namespace {

constexpr uint64_t kMinFrameBytes = 4096;
// Frames may overshoot the target by a quarter plus headers; 512 MiB keeps every frame far
// below the 1 GiB per-frame limit readers enforce.
constexpr uint64_t kMaxFrameTargetBytes = 512ull << 20;
constexpr size_t kReadChunkBytes = 1 << 20;

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
  size_t inflight_ = 0;                  // guarded by mu_: produced and not yet written
  uint64_t produced_ = 0;                // guarded by mu_
  bool producer_done_ = false;           // guarded by mu_
  std::deque<FrameJob> todo_;            // guarded by mu_
  std::map<uint64_t, FrameDone> done_;   // guarded by mu_
  Status error_;                         // guarded by mu_
};

// Builds the tar stream and cuts it into frames. Runs on its own thread; touches the
// ScannedTree nodes (data_offset, digests, hardlink groups) that nobody else reads until join.
class Producer {
 public:
  Producer(ScannedTree& tree, const PackConfig& config, Pipeline& pipe, std::vector<uint32_t> order)
      : tree_(tree), nodes_(tree.model.nodes), config_(config), pipe_(pipe), order_(std::move(order)),
        target_(config.frame_size_bytes) {}

  std::atomic<uint64_t> files_done{0}, bytes_in{0};
  uint64_t stream_bytes = 0, hardlinks = 0;

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

  Status flush() {
    if (cur_.empty()) return Status();
    FrameJob job{seq_++, std::move(cur_)};
    cur_.clear();
    if (!pipe_.push(std::move(job))) return pipe_.error();
    return Status();
  }

  void append(std::string_view bytes) {
    cur_.append(bytes);
    stream_bytes += bytes.size();
  }

  Result<Fd> open_file(uint32_t id) {
    int32_t ri = tree_.node_root[id];
    const auto& root = tree_.model.roots[static_cast<size_t>(ri)];
    if (root.node == id) {
      int fd = ::open(root.original_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return errno_status("opening " + root.original_path);
      return Fd(fd);
    }
    uint32_t parent = nodes_[id].parent;
    if (parent != cached_dir_node_ || !cached_dir_.valid()) {
      std::vector<std::string> comps;
      for (uint32_t n = parent; n != root.node; n = nodes_[n].parent) comps.push_back(nodes_[n].name);
      std::reverse(comps.begin(), comps.end());
      LC_ASSIGN_OR_RETURN(Fd root_dir, open_dir_path(root.original_path, false));
      LC_ASSIGN_OR_RETURN(cached_dir_, open_dir_below(root_dir.get(), comps, false, root.original_path));
      cached_dir_node_ = parent;
    }
    int fd = ::openat(cached_dir_.get(), nodes_[id].name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno_status("opening " + member_path(id));
    return Fd(fd);
  }

  Status write_file_data(uint32_t id) {
    IndexNode& n = nodes_[id];
    LC_ASSIGN_OR_RETURN(Fd fd, open_file(id));
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    Xxh3Stream hash;
    uint64_t remaining = n.size;
    bool short_read = false;
    while (remaining > 0) {
      // Split a member only when at least a quarter frame would spill over: small files stay
      // whole in one frame, big ones are cut at the target size.
      if (cur_.size() >= target_ && remaining >= target_ / 4) LC_RETURN_IF_ERROR(flush());
      uint64_t room = cur_.size() < target_ ? target_ - cur_.size() : remaining;
      size_t chunk = static_cast<size_t>(std::min<uint64_t>({remaining, room, kReadChunkBytes}));
      size_t old = cur_.size();
      cur_.resize(old + chunk);
      size_t got = 0;
      while (got < chunk && !short_read) {
        ssize_t r = ::read(fd.get(), cur_.data() + old + got, chunk - got);
        if (r < 0) {
          if (errno == EINTR) continue;
          return errno_status("reading " + member_path(id));
        }
        if (r == 0) short_read = true;
        got += static_cast<size_t>(r);
      }
      // A file that shrank while packing is padded with zeros so the stream stays valid.
      std::fill(cur_.begin() + static_cast<std::ptrdiff_t>(old + got), cur_.end(), '\0');
      hash.update(std::as_bytes(std::span<const char>(cur_.data() + old, chunk)));
      stream_bytes += chunk;
      remaining -= chunk;
      bytes_in += chunk;
    }
    char extra;
    if (short_read || ::read(fd.get(), &extra, 1) > 0)
      config_.warn("file " + member_path(id) + " changed size while being packed; archived as its first " + std::to_string(n.size) + " bytes (zero-padded if it shrank)");
    n.content_digest = hash.digest();
    append(std::string(tar_padding(n.size), '\0'));
    return Status();
  }

  Status write_member(uint32_t id) {
    IndexNode& n = nodes_[id];
    TarMember m;
    m.path = member_path(id);
    m.mode = n.mode;
    m.uid = n.uid;
    m.gid = n.gid;
    m.mtime_ns = n.mtime_ns;
    for (const auto& x : n.xattrs) m.xattrs.emplace_back(x.name, x.value);
    bool data = false;
    switch (n.type) {
      case EntryType::kDirectory: m.type = TarType::kDirectory; break;
      case EntryType::kSymlink:
        m.type = TarType::kSymlink;
        m.linkname = n.symlink_target;
        break;
      case EntryType::kRegular: {
        auto key = tree_.dev_ino[id];
        auto it = tree_.stat_nlink[id] > 1 ? leaders_.find(key) : leaders_.end();
        if (it != leaders_.end()) {
          m.type = TarType::kHardlink;
          m.linkname = member_path(it->second);
          n.link_group = it->second;
          ++hardlinks;
        } else {
          if (tree_.stat_nlink[id] > 1) leaders_.emplace(key, id);
          m.type = TarType::kRegular;
          m.size = n.size;
          data = true;
        }
        break;
      }
    }
    append(tar_header_bytes(m));
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
    append(tar_end_blocks());
    LC_RETURN_IF_ERROR(flush());
    // Hardlink members share their leader's data; nlink counts the names in the archive.
    std::map<uint32_t, uint32_t> group_size;
    for (uint32_t id : order_)
      if (nodes_[id].type == EntryType::kRegular) ++group_size[nodes_[id].link_group];
    for (uint32_t id : order_) {
      IndexNode& n = nodes_[id];
      if (n.type != EntryType::kRegular) continue;
      const IndexNode& leader = nodes_[n.link_group];
      n.data_offset = leader.data_offset;
      n.content_digest = leader.content_digest;
      n.size = leader.size;
      n.nlink = group_size[n.link_group];
    }
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
  Fd cached_dir_;
  uint32_t cached_dir_node_ = UINT32_MAX;
};

// Member order: hot files first (in the given order), then a depth-first walk with children
// sorted bytewise. Implicit ancestor directories and the top are not members.
std::vector<uint32_t> member_order(const IndexModel& model, const std::vector<uint32_t>& hot) {
  std::vector<uint32_t> order;
  std::vector<bool> done(model.nodes.size(), false);
  for (uint32_t h : hot) {
    order.push_back(h);
    done[h] = true;
  }
  std::vector<uint32_t> stack{0};
  while (!stack.empty()) {
    uint32_t id = stack.back();
    stack.pop_back();
    const IndexNode& n = model.nodes[id];
    if (id != 0 && !n.implicit_dir && !done[id]) order.push_back(id);
    for (auto it = n.children.rbegin(); it != n.children.rend(); ++it) stack.push_back(*it);
  }
  return order;
}

std::optional<uint32_t> find_node(const IndexModel& model, const std::string& path) {
  uint32_t cur = 0;
  for (const auto& part : split_path(path)) {
    const auto& ch = model.nodes[cur].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), part, [&](uint32_t c, const std::string& p) { return model.nodes[c].name < p; });
    if (it == ch.end() || model.nodes[*it].name != part) return std::nullopt;
    cur = *it;
  }
  return cur;
}

}  // namespace

Result<PackStats> write_archive(const std::vector<PackRoot>& roots, ByteSink& sink, const PackConfig& config_in) {
  auto start = std::chrono::steady_clock::now();
  PackConfig config = config_in;
  if (!config.warn) config.warn = [](const std::string& m) { std::cerr << "lazycache: warning: " << m << "\n"; };
  if (config.frame_size_bytes < kMinFrameBytes || config.frame_size_bytes > kMaxFrameTargetBytes)
    return Status(ErrorCode::kInvalidArgument, "frame size must be between 4 KiB and 512 MiB");
  if (config.level < 1 || config.level > 22) return Status(ErrorCode::kInvalidArgument, "zstd level must be between 1 and 22");
  int threads = config.threads > 0 ? config.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  char cwd_buf[4096];
  if (!::getcwd(cwd_buf, sizeof cwd_buf)) return errno_status("getcwd");
  LC_ASSIGN_OR_RETURN(auto normalized, normalize_roots(roots, cwd_buf));
  LC_ASSIGN_OR_RETURN(ScannedTree tree, scan_tree(normalized, config.xattrs, config.warn));
  auto& nodes = tree.model.nodes;
  for (auto& n : nodes)  // children were added in sorted order per directory; keep lookups simple
    std::sort(n.children.begin(), n.children.end(), [&](uint32_t a, uint32_t b) { return nodes[a].name < nodes[b].name; });

  std::vector<uint32_t> hot;
  for (const auto& p : config.hot_paths) {
    auto id = find_node(tree.model, p);
    if (id && nodes[*id].type == EntryType::kRegular && std::find(hot.begin(), hot.end(), *id) == hot.end()) hot.push_back(*id);
  }

  PackProgress progress;
  for (const auto& n : nodes)
    if (n.type == EntryType::kRegular) {
      ++progress.files_total;
      progress.bytes_in_total += n.size;
    }

  Pipeline pipe(static_cast<size_t>(2 * threads + 2));
  Producer producer(tree, config, pipe, member_order(tree.model, hot));
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
  model.tool_version = config.tool_version;
  for (const auto& n : nodes) {
    if (n.type == EntryType::kRegular) {
      ++model.totals.file_count;
      if (&n == &nodes[n.link_group]) model.totals.file_bytes += n.size;
    } else if (n.type == EntryType::kDirectory) {
      if (&n != &nodes[0] && !n.implicit_dir) ++model.totals.dir_count;  // tar members only
    } else {
      ++model.totals.symlink_count;
    }
  }
  model.totals.uncompressed_bytes = uncompressed_offset;
  model.totals.compressed_bytes = compressed_offset;
  LC_ASSIGN_OR_RETURN(std::string raw_index, serialize_index(model));
  LC_ASSIGN_OR_RETURN(std::string index_frame, build_index_frame(raw_index, config.level));
  std::vector<SeekEntry> table;
  for (const auto& f : frames) table.push_back(SeekEntry{f.compressed_offset, f.compressed_size, f.uncompressed_offset, f.uncompressed_size, f.xxh64_low32});
  table.push_back(SeekEntry{compressed_offset, static_cast<uint32_t>(index_frame.size()), uncompressed_offset, 0, xxh64_low32({})});
  std::string seek_table = SeekTable::serialize(table);
  LC_RETURN_IF_ERROR(sink.write(std::as_bytes(std::span<const char>(index_frame))).with_context("writing the index"));
  LC_RETURN_IF_ERROR(sink.write(std::as_bytes(std::span<const char>(seek_table))).with_context("writing the seek table"));
  LC_RETURN_IF_ERROR(sink.commit().with_context("committing the archive"));

  stats.files = model.totals.file_count - producer.hardlinks;
  stats.dirs = model.totals.dir_count;
  stats.symlinks = model.totals.symlink_count;
  stats.hardlinks = producer.hardlinks;
  stats.skipped = tree.skipped;
  stats.file_bytes = model.totals.file_bytes;
  stats.uncompressed_bytes = uncompressed_offset;
  stats.archive_bytes = compressed_offset + index_frame.size() + seek_table.size();
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
