// SPDX-License-Identifier: MIT
// write_incremental_archive(): rebuild the base's layout from its index, scan the new tree,
// plan which base units line up with the new member order, then stream: reused units are copied
// frame by frame (fetched one run ahead on a helper thread), the rest is packed fresh.
#include "format/incremental_writer.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "format/archive_tail.h"
#include "format/file_data.h"
#include "format/frame_codec.h"
#include "format/fs_util.h"
#include "format/hashing.h"
#include "format/pack_order.h"
#include "format/tar.h"

namespace lazycache::format {

namespace {

constexpr uint32_t kNone = UINT32_MAX;
// Bounds one fetch (and, with the queue depth, the memory held by fetched frames) while staying
// large enough that a store serves it as one efficient range read.
constexpr uint64_t kMaxFetchRunBytes = 32ull << 20;
constexpr size_t kFetchQueueDepth = 1;

Status unsupported(const std::string& why) {
  return Status(ErrorCode::kUnsupported, "the base archive's layout is not one incremental save recognises: " + why);
}

uint64_t hash_of(const std::string& bytes) { return xxh3_64(std::as_bytes(std::span<const char>(bytes))); }

// ---- the base layout, rebuilt from its index ----

struct BaseMember {
  EntryId id = 0;
  uint64_t start = 0;        // first header byte in the base tar stream
  uint64_t header_hash = 0;  // XXH3-64 of the regenerated header bytes
};

// The shortest run of base frames that starts and ends on member boundaries.
struct BaseUnit {
  uint32_t first_frame = 0, last_frame = 0;
  uint32_t first_member = 0, member_count = 0;
  uint64_t start = 0;
};

struct BaseLayout {
  std::vector<BaseMember> members;  // in stream order
  std::vector<uint32_t> member_of;  // per entry id: index into members, or kNone (not a member)
  std::vector<EntryId> hot_region;  // the hot prefix, in stream order
  std::vector<BaseUnit> units;      // only units that hold members and no end-of-archive blocks
  std::vector<uint32_t> unit_at;    // per member: the reusable unit starting with it, or kNone
};

// The tar member write_archive wrote for entry `e`: the index keeps every header field.
TarMember base_member_header(const Index& idx, const Entry& e, bool* has_data) {
  TarMember m;
  m.path = idx.path(e.id);
  m.mode = e.mode;
  m.uid = e.uid;
  m.gid = e.gid;
  m.mtime_ns = e.mtime_ns;
  if (e.has_xattrs)
    for (auto& x : idx.xattrs(e.id)) m.xattrs.emplace_back(x.name, x.value);
  *has_data = false;
  switch (e.type) {
    case EntryType::kDirectory: m.type = TarType::kDirectory; break;
    case EntryType::kSymlink:
      m.type = TarType::kSymlink;
      m.linkname = std::string(e.symlink_target);
      break;
    case EntryType::kRegular:
      if (e.link_group != e.id) {
        m.type = TarType::kHardlink;
        m.linkname = idx.path(e.link_group);
      } else {
        m.type = TarType::kRegular;
        m.size = e.size;
        *has_data = true;
      }
      break;
  }
  return m;
}

class LayoutBuilder {
 public:
  explicit LayoutBuilder(const Index& idx) : idx_(idx), emitted_(idx.entry_count(), false) {
    out_.member_of.assign(idx.entry_count(), kNone);
  }

  Result<BaseLayout> build() {
    // The hot prefix: hot-list files as long as each sits exactly where the replay puts it. Our
    // own incremental archives list more hot files than they lay out first; the first that is
    // elsewhere ends the prefix.
    for (EntryId id : idx_.hot_list()) {
      if (id >= idx_.entry_count() || emitted_[id] || idx_.entry(id).type != EntryType::kRegular) break;
      LC_ASSIGN_OR_RETURN(bool placed, emit(id, false));
      if (!placed) break;
      out_.hot_region.push_back(id);
    }
    std::vector<EntryId> stack{idx_.root()};
    while (!stack.empty()) {
      EntryId id = stack.back();
      stack.pop_back();
      Entry e = idx_.entry(id);
      if (id != idx_.root() && !e.implicit_dir && !emitted_[id]) LC_RETURN_IF_ERROR(emit(id, true).status());
      if (e.type != EntryType::kDirectory) continue;
      auto kids = idx_.children(id);
      for (uint32_t i = kids.count; i > 0; --i) stack.push_back(kids.first + i - 1);
    }
    const uint64_t members_end = pos_;
    if (members_end + 2 * kTarBlock != idx_.totals().uncompressed_bytes)
      return unsupported("its members end at " + std::to_string(members_end) + " but the tar stream is " +
                         std::to_string(idx_.totals().uncompressed_bytes) + " bytes");
    cut_units(members_end);
    return std::move(out_);
  }

 private:
  // Appends `id` to the replay. With `strict` false a file that is not where the replay would put
  // it returns false (end of the hot prefix) instead of an error.
  Result<bool> emit(EntryId id, bool strict) {
    Entry e = idx_.entry(id);
    if (e.type == EntryType::kRegular && e.link_group != id && (e.link_group >= emitted_.size() || !emitted_[e.link_group])) {
      if (!strict) return false;
      return unsupported("hardlink " + idx_.path(id) + " comes before its target");
    }
    bool data = false;
    TarMember m = base_member_header(idx_, e, &data);
    std::string header = tar_header_bytes(m);
    if (data && e.data_offset != pos_ + header.size()) {
      if (!strict) return false;
      return unsupported(m.path + " is at offset " + std::to_string(e.data_offset) + ", the replay puts it at " +
                         std::to_string(pos_ + header.size()));
    }
    out_.member_of[id] = static_cast<uint32_t>(out_.members.size());
    out_.members.push_back(BaseMember{id, pos_, hash_of(header)});
    emitted_[id] = true;
    pos_ += header.size() + (data ? e.size + tar_padding(e.size) : 0);
    return true;
  }

  void cut_units(uint64_t members_end) {
    const auto frames = idx_.frames();
    const auto& members = out_.members;
    out_.unit_at.assign(members.size(), kNone);
    uint32_t mi = 0;
    for (uint32_t f = 0; f < frames.size();) {
      const uint64_t start = frames[f].uncompressed_offset;
      while (mi < members.size() && members[mi].start < start) ++mi;
      const bool clean_start = mi < members.size() && members[mi].start == start;
      uint32_t last = f, mj = mi;
      uint64_t end = 0;
      for (;;) {
        end = frames[last].uncompressed_offset + frames[last].uncompressed_size;
        while (mj < members.size() && members[mj].start < end) ++mj;
        const bool clean_end = (mj < members.size() && members[mj].start == end) || (mj == members.size() && end == members_end);
        if (clean_end || last + 1 == frames.size()) break;
        ++last;
      }
      if (clean_start && mj > mi && end <= members_end) {
        out_.unit_at[mi] = static_cast<uint32_t>(out_.units.size());
        out_.units.push_back(BaseUnit{f, last, mi, mj - mi, start});
      }
      f = last + 1;
      mi = mj;
    }
  }

  const Index& idx_;
  std::vector<bool> emitted_;
  uint64_t pos_ = 0;
  BaseLayout out_;
};

// ---- fetching base frames on a helper thread, one run ahead ----

class FrameStream {
 public:
  FrameStream(const IncrementalBase& base, std::vector<std::pair<uint32_t, uint32_t>> runs)
      : base_(base), runs_(std::move(runs)), thread_([this] { loop(); }) {}
  ~FrameStream() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
  }

  // The compressed bytes of the next frame of the runs, checked against its digest.
  Result<std::string> next(uint32_t frame) {
    if (!current_ || pos_ == current_->size()) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !ready_.empty(); });
      Result<std::string> r = std::move(ready_.front());
      ready_.pop_front();
      cv_.notify_all();
      if (!r.ok()) return r.error();
      current_ = std::move(r).value();
      pos_ = 0;
      ++calls;
      fetched_bytes += current_->size();
    }
    const FrameInfo& f = base_.index->frames()[frame];
    if (current_->size() - pos_ < f.compressed_size)
      return Status(ErrorCode::kCorrupt, "fetching base frames returned fewer bytes than the frame table says (frame " +
                                             std::to_string(frame) + ")");
    std::string bytes = current_->substr(pos_, f.compressed_size);
    pos_ += f.compressed_size;
    if (xxh3_128(std::as_bytes(std::span<const char>(bytes))) != f.digest)
      return Status(ErrorCode::kCorrupt, "base frame " + std::to_string(frame) + " failed its XXH3-128 digest check");
    return bytes;
  }

  uint32_t calls = 0;
  uint64_t fetched_bytes = 0;

 private:
  void loop() {
    for (const auto& [first, last] : runs_) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return ready_.size() < kFetchQueueDepth || stop_; });
        if (stop_) return;
      }
      Result<std::string> r = base_.fetch_frames(first, last);
      if (r.ok()) {
        const auto frames = base_.index->frames();
        const uint64_t want = frames[last].compressed_offset + frames[last].compressed_size - frames[first].compressed_offset;
        if (r->size() != want)
          r = Status(ErrorCode::kCorrupt, "fetching base frames " + std::to_string(first) + "-" + std::to_string(last) +
                                              " returned " + std::to_string(r->size()) + " bytes, expected " + std::to_string(want));
      }
      const bool failed = !r.ok();
      {
        std::lock_guard lock(mu_);
        ready_.push_back(std::move(r));
      }
      cv_.notify_all();
      if (failed) return;
    }
  }

  const IncrementalBase& base_;
  std::vector<std::pair<uint32_t, uint32_t>> runs_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Result<std::string>> ready_;  // guarded by mu_
  bool stop_ = false;                      // guarded by mu_
  std::optional<std::string> current_;     // consumer side only
  size_t pos_ = 0;
  std::jthread thread_;  // last: starts after everything it uses exists, joins before they go
};

// ---- the new archive ----

struct NewMember {
  uint32_t node = 0;
  uint32_t leader = kNone;       // hardlink member: the node whose data it shares
  uint32_t base_member = kNone;  // the base member with the same header and content
};

// One step of the plan: members [first, first + count) of the new order, fresh or one base unit.
struct Step {
  bool reuse = false;
  uint32_t unit = 0;
  uint32_t first = 0, count = 0;
};

class IncrementalWriter {
 public:
  IncrementalWriter(ScannedTree& tree, const IncrementalBase& base, const BaseLayout& layout, ByteSink& sink,
                    const PackConfig& config)
      : tree_(tree), nodes_(tree.model.nodes), base_(base), idx_(*base.index), layout_(layout), sink_(sink),
        config_(config), target_(config.frame_size_bytes) {}

  IncrementalStats stats;

  // Plans, writes the data frames and fills the model's offsets, digests and frames.
  Status run(const std::set<std::string>& changed) {
    index_paths();
    match_base(changed);
    std::vector<uint32_t> learned = resolve_hot_paths(tree_.model, config_.hot_paths);
    std::vector<uint32_t> physical_hot = place_hot(learned);
    hot_list_ = physical_hot;
    std::vector<bool> listed(nodes_.size(), false);
    for (uint32_t n : physical_hot) listed[n] = true;
    for (uint32_t n : learned)
      if (!listed[n]) hot_list_.push_back(n);
    describe_members(member_order(tree_.model, physical_hot));
    std::vector<Step> plan = make_plan();
    for (const Step& s : plan)
      for (uint32_t i = s.first; s.reuse && i < s.first + s.count; ++i) reused_node_.emplace(members_[i].base_member, members_[i].node);
    FrameStream fetched(base_, fetch_runs(plan));
    for (const Step& s : plan) {
      if (s.reuse) {
        LC_RETURN_IF_ERROR(copy_unit(layout_.units[s.unit], fetched));
      } else {
        for (uint32_t i = s.first; i < s.first + s.count; ++i) LC_RETURN_IF_ERROR(write_member(members_[i]));
      }
    }
    append(tar_end_blocks());
    LC_RETURN_IF_ERROR(flush());
    stats.fetch_calls = fetched.calls;
    stats.compressed_bytes_fetched = fetched.fetched_bytes;
    link_groups();
    return Status();
  }

  std::vector<FrameInfo> frames;
  std::vector<uint32_t> hot_list_;
  uint64_t hardlinks = 0;
  uint64_t stream_bytes = 0;
  uint64_t compressed_bytes = 0;

 private:
  // The scan numbers a node after its parent, so one pass in id order builds every path.
  void index_paths() {
    paths_.resize(nodes_.size());
    for (uint32_t id = 1; id < nodes_.size(); ++id) {
      const uint32_t parent = nodes_[id].parent;
      if (parent >= id) {  // not expected from scan_tree; walk up rather than trust the order
        std::vector<const std::string*> parts;
        for (uint32_t n = id; n != 0; n = nodes_[n].parent) parts.push_back(&nodes_[n].name);
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) paths_[id] += (paths_[id].empty() ? "" : "/") + **it;
      } else {
        paths_[id] = paths_[parent].empty() ? nodes_[id].name : paths_[parent] + "/" + nodes_[id].name;
      }
    }
  }

  void match_base(const std::set<std::string>& changed) {
    base_of_.assign(nodes_.size(), kNone);
    changed_.assign(nodes_.size(), false);
    for (uint32_t id = 1; id < nodes_.size(); ++id) {
      if (nodes_[id].implicit_dir) continue;
      auto b = idx_.lookup_path(paths_[id]);
      if (b && idx_.entry(*b).type == nodes_[id].type) base_of_[id] = *b;
      changed_[id] = base_of_[id] == kNone || changed.count(paths_[id]) > 0;
    }
  }

  // The physical hot region (see the header): the base's, minus what is gone or changed and no
  // longer learned, then learned files that are new or changed.
  std::vector<uint32_t> place_hot(const std::vector<uint32_t>& learned) {
    std::vector<bool> is_learned(nodes_.size(), false), placed(nodes_.size(), false);
    for (uint32_t n : learned) is_learned[n] = true;
    std::map<EntryId, uint32_t> node_of_base;
    for (uint32_t id = 1; id < nodes_.size(); ++id)
      if (base_of_[id] != kNone) node_of_base.emplace(base_of_[id], id);
    std::vector<uint32_t> out;
    if (learned_order_is_new(learned, node_of_base)) {
      // A job read in an order the base did not lay out: write those files first, in that
      // order, so the next mount prefetches them in a few large range reads (issue 5's learned
      // layout). Their frames and their neighbours' are recompressed this once; the next save
      // with the same learned list keeps the layout and reuses them.
      for (uint32_t n : learned) {
        if (nodes_[n].type != EntryType::kRegular || placed[n]) continue;
        placed[n] = true;
        out.push_back(n);
      }
      return out;
    }
    for (EntryId b : layout_.hot_region) {
      auto it = node_of_base.find(b);
      if (it == node_of_base.end()) continue;
      uint32_t n = it->second;
      if (nodes_[n].type != EntryType::kRegular || placed[n] || (changed_[n] && !is_learned[n])) continue;
      placed[n] = true;
      out.push_back(n);
    }
    for (uint32_t n : learned) {
      if (placed[n] || !changed_[n]) continue;
      placed[n] = true;
      out.push_back(n);
    }
    return out;
  }

  // True when `learned` is a new set of files against the base's hot list. Compared as sets with
  // a 10 % tolerance: jobs running steps in parallel read in a slightly different order every
  // time, and laying the files out again for that would recompress them on every save.
  bool learned_order_is_new(const std::vector<uint32_t>& learned, const std::map<EntryId, uint32_t>& node_of_base) const {
    if (learned.empty()) return false;
    std::set<uint32_t> base_hot;
    for (EntryId b : idx_.hot_list()) {
      auto it = node_of_base.find(b);
      if (it != node_of_base.end()) base_hot.insert(it->second);
    }
    size_t differ = 0;
    std::set<uint32_t> seen;
    for (uint32_t n : learned)
      if (seen.insert(n).second && !base_hot.count(n)) ++differ;
    for (uint32_t n : base_hot)
      if (!seen.count(n)) ++differ;
    return differ * 10 > seen.size();
  }

  TarMember header_of(uint32_t id, uint32_t leader) const {
    return node_tar_member(nodes_[id], paths_[id], leader == kNone ? nullptr : &paths_[leader]);
  }

  // Hardlink leaders as write_archive picks them (first name in member order), and which base
  // member each new member equals.
  void describe_members(const std::vector<uint32_t>& order) {
    std::map<std::pair<uint64_t, uint64_t>, uint32_t> leaders;
    members_.reserve(order.size());
    for (uint32_t id : order) {
      NewMember m{id, kNone, kNone};
      if (nodes_[id].type == EntryType::kRegular && tree_.stat_nlink[id] > 1) {
        auto [it, fresh] = leaders.emplace(tree_.dev_ino[id], id);
        if (!fresh) m.leader = it->second;
      }
      if (base_of_[id] != kNone && !changed_[id]) {
        uint32_t bm = layout_.member_of[base_of_[id]];
        if (bm != kNone && layout_.members[bm].header_hash == hash_of(tar_header_bytes(header_of(id, m.leader))))
          m.base_member = bm;
      }
      members_.push_back(m);
    }
  }

  std::vector<Step> make_plan() const {
    std::vector<Step> plan;
    for (uint32_t k = 0; k < members_.size();) {
      const uint32_t bm = members_[k].base_member;
      const uint32_t u = bm == kNone ? kNone : layout_.unit_at[bm];
      bool reuse = u != kNone && k + layout_.units[u].member_count <= members_.size();
      for (uint32_t t = 0; reuse && t < layout_.units[u].member_count; ++t) reuse = members_[k + t].base_member == bm + t;
      if (reuse) {
        plan.push_back(Step{true, u, k, layout_.units[u].member_count});
        k += layout_.units[u].member_count;
      } else {
        if (plan.empty() || plan.back().reuse) plan.push_back(Step{false, 0, k, 0});
        ++plan.back().count;
        ++k;
      }
    }
    return plan;
  }

  // Consecutive base frames the plan copies, merged into reads of at most kMaxFetchRunBytes
  // (a single bigger frame is one read).
  std::vector<std::pair<uint32_t, uint32_t>> fetch_runs(const std::vector<Step>& plan) const {
    const auto bf = idx_.frames();
    std::vector<std::pair<uint32_t, uint32_t>> runs;
    uint64_t run_bytes = 0;
    for (const Step& s : plan) {
      if (!s.reuse) continue;
      const BaseUnit& u = layout_.units[s.unit];
      for (uint32_t f = u.first_frame; f <= u.last_frame; ++f) {
        if (!runs.empty() && runs.back().second + 1 == f && run_bytes + bf[f].compressed_size <= kMaxFetchRunBytes) {
          runs.back().second = f;
          run_bytes += bf[f].compressed_size;
        } else {
          runs.emplace_back(f, f);
          run_bytes = bf[f].compressed_size;
        }
      }
    }
    return runs;
  }

  Status copy_unit(const BaseUnit& u, FrameStream& fetched) {
    LC_RETURN_IF_ERROR(flush());
    const uint64_t new_start = stream_bytes;
    const auto bf = idx_.frames();
    for (uint32_t f = u.first_frame; f <= u.last_frame; ++f) {
      LC_ASSIGN_OR_RETURN(std::string bytes, fetched.next(f));
      FrameInfo info = bf[f];
      info.compressed_offset = compressed_bytes;
      info.uncompressed_offset = stream_bytes;
      LC_RETURN_IF_ERROR(sink_.write(std::as_bytes(std::span<const char>(bytes))).with_context("writing frame " + std::to_string(frames.size())));
      compressed_bytes += info.compressed_size;
      stream_bytes += info.uncompressed_size;
      stats.bytes_reused += info.uncompressed_size;
      ++stats.frames_reused;
      frames.push_back(info);
      report_progress();
    }
    // The unit's members keep their base offsets relative to the unit, and their digests.
    for (uint32_t t = 0; t < u.member_count; ++t) {
      const BaseMember& bm = layout_.members[u.first_member + t];
      Entry e = idx_.entry(bm.id);
      const uint32_t node = reused_node_.at(u.first_member + t);
      if (e.type == EntryType::kRegular && e.link_group == e.id) {
        nodes_[node].data_offset = e.data_offset - u.start + new_start;
        nodes_[node].content_digest = e.content_digest;
        ++files_done_;
      }
    }
    return Status();
  }

  Status write_data(uint32_t id) {
    IndexNode& n = nodes_[id];
    LC_ASSIGN_OR_RETURN(Fd fd, opener_.open(id, paths_[id]));
    auto consumed = [&](uint64_t chunk) {
      stream_bytes += chunk;
      stats.file_bytes_compressed += chunk;
    };
    LC_ASSIGN_OR_RETURN(FileData data, append_file_data(fd.get(), n.size, target_, cur_, [&] { return flush(); }, consumed, paths_[id]));
    if (data.size_changed)
      config_.warn("file " + paths_[id] + " changed size while being packed; archived as its first " + std::to_string(n.size) +
                   " bytes (zero-padded if it shrank)");
    n.content_digest = data.digest;
    append(std::string(tar_padding(n.size), '\0'));
    return Status();
  }

  Status write_member(const NewMember& m) {
    IndexNode& n = nodes_[m.node];
    append(tar_header_bytes(header_of(m.node, m.leader)));
    if (n.type == EntryType::kRegular && m.leader == kNone) {  // hardlinks: link_groups()
      n.data_offset = stream_bytes;
      LC_RETURN_IF_ERROR(write_data(m.node));
      ++stats.files_compressed;
      ++files_done_;
    }
    if (cur_.size() >= target_) LC_RETURN_IF_ERROR(flush());
    return Status();
  }

  void append(std::string_view bytes) {
    cur_.append(bytes);
    stream_bytes += bytes.size();
  }

  Status flush() {
    if (cur_.empty()) return Status();
    auto raw = std::as_bytes(std::span<const char>(cur_));
    LC_ASSIGN_OR_RETURN(std::string compressed, compress_frame(raw, config_.level));
    auto cbytes = std::as_bytes(std::span<const char>(compressed));
    FrameInfo f;
    f.compressed_offset = compressed_bytes;
    f.compressed_size = static_cast<uint32_t>(cbytes.size());
    f.uncompressed_offset = stream_bytes - cur_.size();
    f.uncompressed_size = static_cast<uint32_t>(cur_.size());
    f.xxh64_low32 = xxh64_low32(raw);
    f.digest = xxh3_128(cbytes);
    LC_RETURN_IF_ERROR(sink_.write(cbytes).with_context("writing frame " + std::to_string(frames.size())));
    compressed_bytes += f.compressed_size;
    stats.bytes_compressed += cur_.size();
    ++stats.frames_compressed;
    frames.push_back(f);
    cur_.clear();
    report_progress();
    return Status();
  }

  void report_progress() {
    if (!config_.progress) return;
    PackProgress p;
    p.files_done = files_done_;
    p.bytes_out = compressed_bytes;
    config_.progress(p);
  }

  // Hardlink members share their leader's data (reused ones too, whose link_group the scan set
  // to themselves); nlink counts the names in the archive.
  void link_groups() {
    std::vector<uint32_t> order;
    for (const NewMember& m : members_) {
      order.push_back(m.node);
      if (m.leader == kNone) continue;
      nodes_[m.node].link_group = m.leader;
      ++hardlinks;
    }
    share_hardlink_data(nodes_, order);
  }

  ScannedTree& tree_;
  std::vector<IndexNode>& nodes_;
  const IncrementalBase& base_;
  const Index& idx_;
  const BaseLayout& layout_;
  ByteSink& sink_;
  const PackConfig& config_;
  const uint64_t target_;
  std::vector<std::string> paths_;
  std::vector<uint32_t> base_of_;
  std::vector<bool> changed_;
  std::vector<NewMember> members_;
  std::map<uint32_t, uint32_t> reused_node_;  // base member -> the new node taking its bytes
  std::string cur_;
  uint64_t files_done_ = 0;
  TreeFileOpener opener_{tree_};
};

}  // namespace

Result<IncrementalStats> write_incremental_archive(const std::vector<PackRoot>& roots, const IncrementalBase& base,
                                                   const std::set<std::string>& changed, ByteSink& sink,
                                                   const PackConfig& config_in) {
  auto start = std::chrono::steady_clock::now();
  PackConfig config = config_in;
  if (!config.warn) config.warn = [](const std::string& m) { std::cerr << "lazycache: warning: " << m << "\n"; };
  if (config.frame_size_bytes < 4096 || config.frame_size_bytes > (512ull << 20))
    return Status(ErrorCode::kInvalidArgument, "frame size must be between 4 KiB and 512 MiB");
  if (config.level < 1 || config.level > 22) return Status(ErrorCode::kInvalidArgument, "zstd level must be between 1 and 22");
  if (!base.index || !base.fetch_frames) return Status(ErrorCode::kInvalidArgument, "incremental save needs a base index and a frame fetcher");

  LC_ASSIGN_OR_RETURN(BaseLayout layout, LayoutBuilder(*base.index).build());
  LC_ASSIGN_OR_RETURN(ScannedTree tree, scan_for_pack(roots, config.xattrs, config.warn));

  IncrementalWriter writer(tree, base, layout, sink, config);
  LC_RETURN_IF_ERROR(writer.run(changed));

  IndexModel& model = tree.model;
  model.frames = writer.frames;
  model.hot_nodes = writer.hot_list_;
  model.tool_version = config.tool_version;
  LC_ASSIGN_OR_RETURN(uint64_t tail_bytes, finish_archive(model, sink, config.level));

  IncrementalStats stats = writer.stats;
  PackStats& p = stats.pack;
  p.files = model.totals.file_count - writer.hardlinks;
  p.dirs = model.totals.dir_count;
  p.symlinks = model.totals.symlink_count;
  p.hardlinks = writer.hardlinks;
  p.skipped = tree.skipped;
  p.file_bytes = model.totals.file_bytes;
  p.uncompressed_bytes = writer.stream_bytes;
  p.archive_bytes = writer.compressed_bytes + tail_bytes;
  p.frames = static_cast<uint32_t>(writer.frames.size());
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace lazycache::format
