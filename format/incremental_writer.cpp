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
#include "format/tar.h"

namespace lazycache::format {

namespace {

constexpr uint32_t kNone = UINT32_MAX;
constexpr uint64_t kNotCopied = UINT64_MAX;
// Bounds one fetch (and, with the queue depth, the memory held by fetched frames) while staying
// large enough that a store serves it as one efficient range read.
constexpr uint64_t kMaxFetchRunBytes = 32ull << 20;
constexpr size_t kFetchQueueDepth = 1;
// Dead bytes allowed: at most 1/kUnitDeadShare of a reused unit, 1/kArchiveDeadShare of the new
// tar stream (IncrementalWriter::bound_dead_bytes).
constexpr uint64_t kUnitDeadShare = 2;
constexpr uint64_t kArchiveDeadShare = 4;

Status unsupported(const std::string& why) {
  return Status(ErrorCode::kUnsupported, "the base archive's layout is not one incremental save recognises: " + why);
}

uint64_t hash_of(const std::string& bytes) { return xxh3_64(std::as_bytes(std::span<const char>(bytes))); }

// ---- the base layout, rebuilt from its index ----

struct BaseMember {
  EntryId id = 0;            // the entry; for a dead member, the entry whose live member is later
  uint64_t start = 0;        // first header byte in the base tar stream
  uint64_t length = 0;       // header(s) + data + padding
  uint64_t header_hash = 0;  // XXH3-64 of the regenerated header bytes (live members)
  bool dead = false;
};

// The shortest run of base frames that starts and ends on member boundaries. Reusable unless it
// holds the end-of-archive blocks.
struct BaseUnit {
  uint32_t first_frame = 0, last_frame = 0;
  uint32_t first_member = 0, member_count = 0;
  uint64_t start = 0, bytes = 0;  // in the base tar stream
  uint64_t dead_bytes = 0;        // of dead members already in it
  bool reusable = false;
};

struct BaseLayout {
  std::vector<BaseMember> members;         // in stream order, live and dead
  std::vector<BaseUnit> units;             // in stream order; every member is in exactly one
  std::vector<uint64_t> live_header_hash;  // per base entry: header_hash of its live member
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

// Version 1 indexes do not record where members start: replay write_archive's order (the hot
// prefix, then depth-first) to find out. Our own version 1 incremental archives list more hot
// files than they lay out first; the first that is elsewhere ends the prefix.
class ReplayV1 {
 public:
  explicit ReplayV1(const Index& idx) : idx_(idx), emitted_(idx.entry_count(), false), start_(idx.entry_count(), kNoMemberOffset) {}

  Result<std::vector<uint64_t>> run() {
    for (EntryId id : idx_.hot_list()) {
      if (id >= idx_.entry_count() || emitted_[id] || idx_.entry(id).type != EntryType::kRegular) break;
      LC_ASSIGN_OR_RETURN(bool placed, emit(id, false));
      if (!placed) break;
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
    return std::move(start_);
  }

 private:
  // With `strict` false a file that is not where the replay would put it returns false.
  Result<bool> emit(EntryId id, bool strict) {
    Entry e = idx_.entry(id);
    if (e.type == EntryType::kRegular && e.link_group != id && (e.link_group >= emitted_.size() || !emitted_[e.link_group])) {
      if (!strict) return false;
      return unsupported("hardlink " + idx_.path(id) + " comes before its target");
    }
    bool data = false;
    const size_t header = tar_header_bytes(base_member_header(idx_, e, &data)).size();
    if (data && e.data_offset != pos_ + header) {
      if (!strict) return false;
      return unsupported(idx_.path(id) + " is at offset " + std::to_string(e.data_offset) + ", the replay puts it at " +
                         std::to_string(pos_ + header));
    }
    start_[id] = pos_;
    emitted_[id] = true;
    pos_ += header + (data ? e.size + tar_padding(e.size) : 0);
    return true;
  }

  const Index& idx_;
  std::vector<bool> emitted_;
  std::vector<bool> in_tail_;        // written at the end, after every base unit
  std::vector<bool> forced_;         // nodes that must be written at the end (make_plan)
  std::vector<uint32_t> hot_first_;  // a new learned layout: written first at the end
  std::vector<uint64_t> start_;
  uint64_t pos_ = 0;
};

Result<BaseLayout> build_layout(const Index& idx) {
  std::vector<uint64_t> starts(idx.entry_count(), kNoMemberOffset);
  if (idx.member_offset(0)) {
    for (EntryId id = 0; id < idx.entry_count(); ++id) starts[id] = *idx.member_offset(id);
  } else {
    LC_ASSIGN_OR_RETURN(starts, ReplayV1(idx).run());
  }
  BaseLayout out;
  for (EntryId id = 0; id < idx.entry_count(); ++id) {
    if (starts[id] == kNoMemberOffset) continue;
    Entry e = idx.entry(id);
    bool data = false;
    const std::string header = tar_header_bytes(base_member_header(idx, e, &data));
    if (data && e.data_offset != starts[id] + header.size())
      return unsupported(idx.path(id) + ": its data is not right after its regenerated header");
    out.members.push_back(BaseMember{id, starts[id], header.size() + (data ? e.size + tar_padding(e.size) : 0), hash_of(header), false});
  }
  out.live_header_hash.assign(idx.entry_count(), 0);
  for (const BaseMember& m : out.members) out.live_header_hash[m.id] = m.header_hash;
  for (const DeadMember& d : idx.dead_members()) out.members.push_back(BaseMember{d.entry, d.start, d.length, 0, true});
  std::sort(out.members.begin(), out.members.end(), [](const BaseMember& a, const BaseMember& b) { return a.start < b.start; });
  uint64_t pos = 0;
  for (const BaseMember& m : out.members) {
    if (m.start != pos)
      return unsupported("the member of " + idx.path(m.id) + " starts at " + std::to_string(m.start) + ", the previous one ends at " +
                         std::to_string(pos));
    pos += m.length;
  }
  const uint64_t members_end = pos;
  if (members_end + 2 * kTarBlock != idx.totals().uncompressed_bytes)
    return unsupported("its members end at " + std::to_string(members_end) + " but the tar stream is " +
                       std::to_string(idx.totals().uncompressed_bytes) + " bytes");

  const auto frames = idx.frames();
  const auto& members = out.members;
  uint32_t mi = 0;
  for (uint32_t f = 0; f < frames.size();) {
    uint32_t last = f, mj = mi;
    uint64_t end = 0;
    for (;;) {
      end = frames[last].uncompressed_offset + frames[last].uncompressed_size;
      while (mj < members.size() && members[mj].start < end) ++mj;
      const bool clean_end = (mj < members.size() && members[mj].start == end) || (mj == members.size() && end == members_end);
      if (clean_end || last + 1 == frames.size()) break;
      ++last;
    }
    BaseUnit u{f, last, mi, mj - mi, frames[f].uncompressed_offset, end - frames[f].uncompressed_offset, 0, false};
    // Every unit starts where the previous one ended on a member boundary, so only the one
    // holding the end-of-archive blocks (or a stream past the members) is not reusable.
    u.reusable = mj > mi && end <= members_end && members[mi].start == u.start;
    for (uint32_t k = mi; k < mj; ++k)
      if (members[k].dead) u.dead_bytes += members[k].length;
    out.units.push_back(u);
    f = last + 1;
    mi = mj;
  }
  return out;
}

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
      return Status(ErrorCode::kCorrupt,
                    "fetching base frames returned fewer bytes than the frame table says (frame " + std::to_string(frame) + ")");
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
          r = Status(ErrorCode::kCorrupt, "fetching base frames " + std::to_string(first) + "-" + std::to_string(last) + " returned " +
                                              std::to_string(r->size()) + " bytes, expected " + std::to_string(want));
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
  uint32_t leader = kNone;  // hardlink member: the node whose data it shares
};

// One step of the plan: a base unit copied as it is, or members packed fresh.
struct Step {
  bool reuse = false;
  uint32_t unit = 0;
  std::vector<NewMember> fresh;
  // reuse: per member of the unit, the node it now belongs to and whether it is dead (already
  // dead in the base, or superseded by a member packed later).
  std::vector<std::pair<uint32_t, bool>> nodes;
};

class IncrementalWriter {
 public:
  IncrementalWriter(ScannedTree& tree, const IncrementalBase& base, const BaseLayout& layout, ByteSink& sink, const PackConfig& config)
      : tree_(tree), nodes_(tree.model.nodes), base_(base), idx_(*base.index), layout_(layout), sink_(sink), config_(config),
        target_(config.frame_size_bytes) {}

  IncrementalStats stats;

  // Plans, writes the data frames and fills the model's offsets, digests, frames and dead members.
  Status run(const std::set<std::string>& changed) {
    const auto start = std::chrono::steady_clock::now();
    index_paths();
    match_base(changed);
    std::vector<uint32_t> learned = resolve_hot_paths(tree_.model, config_.hot_paths);
    std::vector<Step> plan = make_plan(learned, true);
    const bool relayout = !hot_first_.empty();  // the learned order is new: a relayout was planned
    IncrementalChoice choice = relayout ? IncrementalChoice::kRelayout : IncrementalChoice::kReuse;
    if (base_.choose) {
      IncrementalEstimate est = tree_estimate();
      if (relayout) {
        est.relayout = sizes_of(plan);
        plan = make_plan(learned, false);
      }
      est.reuse = sizes_of(plan);
      choice = base_.choose(est);
      if (choice == IncrementalChoice::kFullPack) return Status(ErrorCode::kCancelled, "a full pack was chosen over this incremental save");
      if (choice == IncrementalChoice::kRelayout && relayout) plan = make_plan(learned, true);
      else choice = IncrementalChoice::kReuse;
    }
    stats.choice = choice;
    const auto frames_start = std::chrono::steady_clock::now();
    stats.phases.plan_s = std::chrono::duration<double>(frames_start - start).count();
    const std::vector<uint64_t> copies = copy_runs(plan);
    FrameStream fetched(base_, fetch_runs(plan, copies));
    for (size_t i = 0; i < plan.size(); ++i) {
      const Step& s = plan[i];
      if (s.reuse && copies[i] != kNotCopied && copies[i] > 0) {
        // The first step of a run the store copies: the whole run at once, then each unit's
        // bookkeeping.
        LC_RETURN_IF_ERROR(flush());
        const FrameInfo& first = idx_.frames()[layout_.units[s.unit].first_frame];
        LC_RETURN_IF_ERROR(base_.copy_to_sink(first.compressed_offset, copies[i]).with_context("copying base frames in the store"));
      }
      if (s.reuse) {
        LC_RETURN_IF_ERROR(copy_unit(s, fetched, copies[i] != kNotCopied));
      } else {
        for (const NewMember& m : s.fresh) LC_RETURN_IF_ERROR(write_member(m));
      }
    }
    // The end-of-archive blocks get a frame of their own, so every frame before them ends on a
    // member boundary and a later incremental save can copy the last one too.
    LC_RETURN_IF_ERROR(flush());
    append(tar_end_blocks());
    LC_RETURN_IF_ERROR(flush());
    stats.phases.frames_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - frames_start).count();
    stats.fetch_calls = fetched.calls;
    stats.compressed_bytes_fetched = fetched.fetched_bytes;
    link_groups();
    return Status();
  }

  std::vector<FrameInfo> frames;
  std::vector<uint32_t> hot_list_;
  std::vector<IndexDeadSpec> dead;
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

  // Which base entry each node is (same path, same type), and which nodes may have new content.
  void match_base(const std::set<std::string>& changed) {
    node_of_base_.assign(idx_.entry_count(), kNone);
    changed_.assign(nodes_.size(), false);
    for (uint32_t id = 1; id < nodes_.size(); ++id) {
      if (nodes_[id].implicit_dir) continue;
      auto b = idx_.lookup_path(paths_[id]);
      const bool in_base = b && idx_.entry(*b).type == nodes_[id].type;
      if (in_base) node_of_base_[*b] = id;
      changed_[id] = !in_base || changed.count(paths_[id]) > 0;
    }
  }

  // The order of the new stream (docs/archive-format.md, "Frames copied from an earlier
  // archive"): the base's units in base order, each copied as it is (members that changed or
  // move left in it as dead members) or, when it cannot be, its members packed fresh in its
  // place; then, at the end, a newly learned hot list in its order, then everything else (new
  // files and the new versions of superseded ones) depth-first.
  //
  // Stock tars set a directory's metadata at its member; creating something in it later (a
  // member at the end) changes its mtime again. So the directories format/dir_repeats.h names
  // for the planned stream are written again at the very end (their earlier members becoming
  // dead): planned again until no directory is added.
  // `allow_relayout` false keeps the base's hot list even when `learned` is new.
  std::vector<Step> make_plan(const std::vector<uint32_t>& learned, bool allow_relayout) {
    forced_.assign(nodes_.size(), false);
    repeat_.assign(nodes_.size(), false);
    repeat_last_.clear();
    hot_first_.clear();
    hot_list_.clear();
    if (allow_relayout && learned_order_is_new(learned)) {
      // A job read in an order the base did not lay out: those files go together at the end,
      // in that order, so the next mount prefetches them in a few large range reads (issue 5's
      // learned layout). Their old members stay behind as dead ones; the next save with the
      // same learned list keeps the layout.
      for (uint32_t n : learned) {
        if (nodes_[n].type != EntryType::kRegular || forced_[n]) continue;
        forced_[n] = true;
        hot_first_.push_back(n);
      }
      hot_list_ = learned;
    } else {
      std::set<uint32_t> listed;
      for (EntryId b : idx_.hot_list()) {
        const uint32_t n = node_of_base_[b];
        if (n != kNone && listed.insert(n).second) hot_list_.push_back(n);
      }
      for (uint32_t n : learned)
        if (listed.insert(n).second) hot_list_.push_back(n);
    }
    repack_.assign(layout_.units.size(), false);
    for (;;) {
      std::vector<Step> plan = plan_once();
      // Units marked to be packed again: plan once more.
      if (bound_dead_bytes(plan) || bound_runner_dead_bytes(plan)) continue;
      std::vector<uint32_t> stream;
      for (const Step& s : plan) {
        if (s.reuse)
          for (const auto& [node, is_dead] : s.nodes) stream.push_back(node);
        else
          for (const NewMember& m : s.fresh) stream.push_back(m.node);
      }
      bool grew = false;
      for (uint32_t d : directories_to_repeat(nodes_, stream)) {
        if (repeat_[d]) continue;
        repeat_[d] = forced_[d] = true;
        repeat_last_.push_back(d);
        grew = true;
      }
      if (!grew) return plan;
    }
  }

  // The dead bytes of a whole archive are bounded, not those of each unit: a unit may carry up to
  // half its bytes dead (kUnitDeadShare), so a save that changes a few files in many units
  // copies them all and compresses only the changed files; but when the plan would leave more
  // than a quarter of the new tar stream dead (kArchiveDeadShare), the units holding the
  // most dead bytes are marked to be packed again in their place (repack_), deadest first, until
  // it would not. So an archive saved any number of times stays within 4/3 of its live bytes,
  // and the bytes a save compresses stay those that changed until the bound is reached.
  // True when units were marked (the caller plans again).
  bool bound_dead_bytes(const std::vector<Step>& plan) {
    uint64_t total = 0, dead_total = 0;
    std::vector<std::pair<uint64_t, uint32_t>> unit_dead;  // (dead bytes, unit) of reused units
    for (const Step& s : plan) {
      if (!s.reuse) {
        for (const NewMember& m : s.fresh)
          total += member_tar_bytes(nodes_[m.node], nodes_[m.node].type == EntryType::kRegular && m.leader == kNone);
        continue;
      }
      const BaseUnit& u = layout_.units[s.unit];
      uint64_t d = 0;
      for (size_t t = 0; t < s.nodes.size(); ++t)
        if (s.nodes[t].second) d += layout_.members[u.first_member + t].length;
      total += u.bytes;
      dead_total += d;
      if (d > 0) unit_dead.emplace_back(d, s.unit);
    }
    if (dead_total * kArchiveDeadShare <= total) return false;
    std::sort(unit_dead.begin(), unit_dead.end(), std::greater<>());
    for (const auto& [d, u] : unit_dead) {
      if (dead_total * kArchiveDeadShare <= total) break;
      repack_[u] = true;  // its live members packed in place: its dead bytes leave the stream
      dead_total -= d;
      total -= d;
    }
    return true;
  }

  std::vector<Step> plan_once() {
    emitted_.assign(nodes_.size(), false);
    in_tail_.assign(nodes_.size(), false);
    leaders_.clear();
    std::vector<Step> plan;
    auto fresh_step = [&]() -> Step& {
      if (plan.empty() || plan.back().reuse) plan.push_back(Step{});
      return plan.back();
    };
    for (uint32_t u = 0; u < layout_.units.size(); ++u) {
      Step reuse{true, u, {}, {}};
      if (!repack_[u] && try_reuse(layout_.units[u], reuse)) {
        plan.push_back(std::move(reuse));
        continue;
      }
      const BaseUnit& unit = layout_.units[u];
      for (uint32_t k = unit.first_member; k < unit.first_member + unit.member_count; ++k) {
        const BaseMember& m = layout_.members[k];
        const uint32_t n = node_of_base_[m.id];
        if (!m.dead && n != kNone && !emitted_[n] && !forced_[n]) fresh_step().fresh.push_back(emit(n));
      }
    }
    auto to_tail = [&](uint32_t n) {
      if (emitted_[n] || repeat_[n]) return;
      in_tail_[n] = true;
      fresh_step().fresh.push_back(emit(n));
    };
    for (uint32_t n : hot_first_) to_tail(n);
    for (uint32_t n : member_order(tree_.model, {})) to_tail(n);
    for (uint32_t n : repeat_last_) fresh_step().fresh.push_back(emit(n));
    return plan;
  }

  // Marks `n` written next and picks its hardlink leader as write_archive does (the first name
  // of the inode in member order).
  NewMember emit(uint32_t n) {
    emitted_[n] = true;
    NewMember m{n, kNone};
    if (nodes_[n].type == EntryType::kRegular && tree_.stat_nlink[n] > 1) {
      auto [it, fresh] = leaders_.emplace(tree_.dev_ino[n], n);
      if (!fresh) m.leader = it->second;
    }
    return m;
  }

  TarMember header_of(uint32_t id, uint32_t leader) const {
    return node_tar_member(nodes_[id], paths_[id], leader == kNone ? nullptr : &paths_[leader]);
  }

  // XXH3-64 of the tar header of `id` (with `leader`). Without a leader it is the same in every
  // plan (nodes and paths do not change while planning), so it is computed once per node:
  // rebuilding every header in each of make_plan's rounds was most of a small save's CPU.
  uint64_t header_hash(uint32_t id, uint32_t leader) {
    if (leader != kNone) return hash_of(tar_header_bytes(header_of(id, leader)));
    if (own_header_hash_.empty()) own_header_hash_.assign(nodes_.size(), std::nullopt);
    std::optional<uint64_t>& h = own_header_hash_[id];
    if (!h) h = hash_of(tar_header_bytes(header_of(id, kNone)));
    return *h;
  }

  // True when node `n` has every field its tar header is made of (node_tar_member) equal to base
  // entry `b`'s (base_member_header), so the two headers are the same bytes without building
  // either: the path is `b`'s by construction (match_base). Building and hashing the header of
  // every unchanged node was about a tenth of a small save's CPU (docs/writable.md, "branch
  // save11"). False says nothing: the caller compares the headers then (hardlinks, changes).
  bool same_header_fields(uint32_t n, EntryId b) const {
    const IndexNode& x = nodes_[n];
    const Entry e = idx_.entry(b);
    if (x.type != e.type || x.mode != e.mode || x.uid != e.uid || x.gid != e.gid || x.mtime_ns != e.mtime_ns) return false;
    if (x.type == EntryType::kRegular && (e.link_group != e.id || x.size != e.size)) return false;
    if (x.type == EntryType::kSymlink && x.symlink_target != e.symlink_target) return false;
    if (x.xattrs.empty() != !e.has_xattrs) return false;
    if (!e.has_xattrs) return true;
    const std::vector<Xattr> base = idx_.xattrs(b);
    if (base.size() != x.xattrs.size()) return false;
    for (size_t i = 0; i < base.size(); ++i)
      if (base[i].name != x.xattrs[i].name || base[i].value != x.xattrs[i].value) return false;
    return true;
  }

  // Decides whether base unit `u` can be copied at the current point of the new stream, filling
  // `step` if so. Every live member must still exist with the same type and not be written yet;
  // it stays live if its header and content are unchanged, and becomes dead (its new version
  // goes to the end) if it is a single-link file, a directory or a symlink. Every dead member
  // must still have a live member to come. Where the base's frames pass through the runner (no
  // store copy), at most half of the unit may end up dead: past that, packing its members again
  // is cheaper than downloading and uploading the garbage. Where the store copies, that check
  // waits for the plan (bound_runner_dead_bytes()): a unit refused here would split the run it
  // sits in, and the pieces may fall under the copy minimum and go through the runner whole. The
  // archive as a whole is bounded by bound_dead_bytes() either way.
  bool try_reuse(const BaseUnit& u, Step& step) {
    if (!u.reusable) return false;
    std::vector<uint32_t> taken;  // emitted here, undone if the unit is refused
    auto refuse = [&] {
      for (uint32_t n : taken) {
        emitted_[n] = false;
        auto it = tree_.stat_nlink[n] > 1 ? leaders_.find(tree_.dev_ino[n]) : leaders_.end();
        if (it != leaders_.end() && it->second == n) leaders_.erase(it);
      }
      return false;
    };
    uint64_t dead_bytes = 0;
    for (uint32_t k = u.first_member; k < u.first_member + u.member_count; ++k) {
      const BaseMember& m = layout_.members[k];
      const uint32_t n = node_of_base_[m.id];
      if (n == kNone || emitted_[n]) return refuse();
      if (m.dead) {
        // A dead directory member says what the base's live one said (see below): if that
        // changed, bsdtar would restore the old metadata from it.
        if (nodes_[n].type == EntryType::kDirectory && header_hash(n, kNone) != layout_.live_header_hash[m.id]) return refuse();
        dead_bytes += m.length;
        step.nodes.emplace_back(n, true);
        continue;
      }
      // Only asked for a member that changed (most do not): Index::entry is not free.
      auto single = [&] { return nodes_[n].type != EntryType::kRegular || (tree_.stat_nlink[n] <= 1 && idx_.entry(m.id).nlink == 1); };
      const uint32_t leader = [&] {
        if (nodes_[n].type != EntryType::kRegular || tree_.stat_nlink[n] <= 1) return kNone;
        auto it = leaders_.find(tree_.dev_ino[n]);
        return it == leaders_.end() ? kNone : it->second;
      }();
      const bool same_header = (leader == kNone && same_header_fields(n, m.id)) || header_hash(n, leader) == m.header_hash;
      if (!changed_[n] && !forced_[n] && same_header) {
        taken.push_back(emit(n).node);
        step.nodes.emplace_back(n, false);
      } else if (nodes_[n].type == EntryType::kDirectory && !same_header) {
        // bsdtar applies the metadata of the member that created a directory when it finishes,
        // after any later member of it: a dead directory member must say what the live one says.
        return refuse();
      } else if (single()) {
        dead_bytes += m.length;
        step.nodes.emplace_back(n, true);
      } else {
        return refuse();
      }
    }
    if (!base_.copy_to_sink && dead_bytes * kUnitDeadShare > u.bytes) return refuse();
    return true;
  }

  // The per-unit dead limit of try_reuse() for the units of a plan whose frames go through the
  // runner after all (runs under the store's copy minimum): those past it are marked to be
  // packed again (repack_). Their runs are not copied, so marking them never makes a copied run
  // smaller. True when units were marked (the caller plans again).
  bool bound_runner_dead_bytes(const std::vector<Step>& plan) {
    if (!base_.copy_to_sink) return false;  // try_reuse() applied the limit already
    const std::vector<uint64_t> copies = copy_runs(plan);
    bool marked = false;
    for (size_t i = 0; i < plan.size(); ++i) {
      const Step& s = plan[i];
      if (!s.reuse || copies[i] != kNotCopied) continue;
      const BaseUnit& u = layout_.units[s.unit];
      uint64_t d = 0;
      for (size_t t = 0; t < s.nodes.size(); ++t)
        if (s.nodes[t].second) d += layout_.members[u.first_member + t].length;
      if (d * kUnitDeadShare > u.bytes) {
        repack_[s.unit] = true;
        marked = true;
      }
    }
    return marked;
  }

  // True when `learned` is a new set of files against the base's hot list. Compared as sets with
  // a 10 % tolerance: jobs running steps in parallel read in a slightly different order every
  // time, and laying the files out again for that would recompress them on every save.
  bool learned_order_is_new(const std::vector<uint32_t>& learned) const {
    if (learned.empty()) return false;
    std::set<uint32_t> base_hot;
    for (EntryId b : idx_.hot_list())
      if (node_of_base_[b] != kNone) base_hot.insert(node_of_base_[b]);
    size_t differ = 0;
    std::set<uint32_t> seen;
    for (uint32_t n : learned)
      if (seen.insert(n).second && !base_hot.count(n)) ++differ;
    for (uint32_t n : base_hot)
      if (!seen.count(n)) ++differ;
    return differ * 10 > seen.size();
  }

  static uint64_t member_tar_bytes(const IndexNode& n, bool data) { return kTarBlock + (data ? n.size + tar_padding(n.size) : 0); }

  IncrementalPlanSizes sizes_of(const std::vector<Step>& plan) const {
    IncrementalPlanSizes out;
    const std::vector<uint64_t> copies = copy_runs(plan);
    const auto bf = idx_.frames();
    for (size_t i = 0; i < plan.size(); ++i) {
      const Step& s = plan[i];
      if (s.reuse) {
        const BaseUnit& u = layout_.units[s.unit];
        out.reused_compressed_bytes += bf[u.last_frame].compressed_offset + bf[u.last_frame].compressed_size -
                                       bf[u.first_frame].compressed_offset;
        if (copies[i] != kNotCopied) out.copied_compressed_bytes += copies[i];
        continue;
      }
      for (const NewMember& m : s.fresh) {
        const bool data = nodes_[m.node].type == EntryType::kRegular && m.leader == kNone;
        out.fresh_tar_bytes += member_tar_bytes(nodes_[m.node], data);
        if (data) {
          out.fresh_file_bytes += nodes_[m.node].size;
          ++out.fresh_files;
        }
      }
    }
    return out;
  }

  IncrementalEstimate tree_estimate() const {
    IncrementalEstimate est;
    for (uint32_t n = 1; n < nodes_.size(); ++n) {
      if (nodes_[n].implicit_dir) continue;
      const bool data = nodes_[n].type == EntryType::kRegular;
      est.tree_tar_bytes += member_tar_bytes(nodes_[n], data);
      est.tree_files += data ? 1 : 0;
    }
    for (const FrameInfo& f : idx_.frames()) est.base_compressed_bytes += f.compressed_size;
    return est;
  }

  // Per plan step: kNotCopied, or (a reuse step in a run the store copies) 0, except the run's
  // first step, which holds the run's compressed bytes. A run is consecutive reuse steps whose
  // units follow each other in the base, so its bytes are one range of the base object.
  std::vector<uint64_t> copy_runs(const std::vector<Step>& plan) const {
    std::vector<uint64_t> out(plan.size(), kNotCopied);
    if (!base_.copy_to_sink) return out;
    const auto bf = idx_.frames();
    auto unit_bytes = [&](const BaseUnit& u) {
      return bf[u.last_frame].compressed_offset + bf[u.last_frame].compressed_size - bf[u.first_frame].compressed_offset;
    };
    for (size_t i = 0; i < plan.size();) {
      if (!plan[i].reuse) {
        ++i;
        continue;
      }
      size_t j = i + 1;
      uint64_t bytes = unit_bytes(layout_.units[plan[i].unit]);
      while (j < plan.size() && plan[j].reuse &&
             layout_.units[plan[j].unit].first_frame == layout_.units[plan[j - 1].unit].last_frame + 1) {
        bytes += unit_bytes(layout_.units[plan[j].unit]);
        ++j;
      }
      if (bytes >= std::max<uint64_t>(base_.copy_min_bytes, 1)) {
        for (size_t k = i; k < j; ++k) out[k] = 0;
        out[i] = bytes;
      }
      i = j;
    }
    return out;
  }

  // Consecutive base frames the plan reuses and the store does not copy, merged into reads of at
  // most kMaxFetchRunBytes (a single bigger frame is one read).
  std::vector<std::pair<uint32_t, uint32_t>> fetch_runs(const std::vector<Step>& plan, const std::vector<uint64_t>& copies) const {
    const auto bf = idx_.frames();
    std::vector<std::pair<uint32_t, uint32_t>> runs;
    uint64_t run_bytes = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
      const Step& s = plan[i];
      if (!s.reuse || copies[i] != kNotCopied) continue;
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

  // `in_store`: the unit's bytes were already appended by copy_to_sink.
  Status copy_unit(const Step& s, FrameStream& fetched, bool in_store) {
    const BaseUnit& u = layout_.units[s.unit];
    LC_RETURN_IF_ERROR(flush());
    const uint64_t new_start = stream_bytes;
    const auto bf = idx_.frames();
    for (uint32_t f = u.first_frame; f <= u.last_frame; ++f) {
      FrameInfo info = bf[f];
      info.compressed_offset = compressed_bytes;
      info.uncompressed_offset = stream_bytes;
      if (in_store) {
        ++stats.frames_copied;
        stats.compressed_bytes_copied += info.compressed_size;
      } else {
        LC_ASSIGN_OR_RETURN(std::string bytes, fetched.next(f));
        LC_RETURN_IF_ERROR(
            sink_.write(std::as_bytes(std::span<const char>(bytes))).with_context("writing frame " + std::to_string(frames.size())));
      }
      compressed_bytes += info.compressed_size;
      stream_bytes += info.uncompressed_size;
      stats.bytes_reused += info.uncompressed_size;
      ++stats.frames_reused;
      frames.push_back(info);
      report_progress();
    }
    // Live members keep their base offsets relative to the unit, and their digests; dead ones
    // are recorded so readers and the next save know the bytes are there.
    for (uint32_t t = 0; t < u.member_count; ++t) {
      const BaseMember& bm = layout_.members[u.first_member + t];
      const auto [node, is_dead] = s.nodes[t];
      const uint64_t at = bm.start - u.start + new_start;
      if (is_dead) {
        dead.push_back(IndexDeadSpec{at, bm.length, node});
        stats.dead_bytes += bm.length;
        if (!bm.dead) ++stats.members_superseded;
        continue;
      }
      members_.push_back(NewMember{node, kNone});
      nodes_[node].member_offset = at;
      Entry e = idx_.entry(bm.id);
      if (e.type == EntryType::kRegular && e.link_group == e.id) {
        nodes_[node].data_offset = e.data_offset - u.start + new_start;
        nodes_[node].content_digest = e.content_digest;
        ++files_done_;
      } else if (e.type == EntryType::kRegular) {
        // A hardlink member: its header named the leader, which the plan checked is the same.
        members_.back().leader = leaders_.at(tree_.dev_ino[node]);
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
    LC_ASSIGN_OR_RETURN(FileData data, append_file_data(
                                           fd.get(), n.size, target_, cur_, [&] { return flush(); }, consumed, paths_[id]));
    if (data.size_changed)
      config_.warn("file " + paths_[id] + " changed size while being packed; archived as its first " + std::to_string(n.size) +
                   " bytes (zero-padded if it shrank)");
    n.content_digest = data.digest;
    append(std::string(tar_padding(n.size), '\0'));
    return Status();
  }

  Status write_member(const NewMember& m) {
    IndexNode& n = nodes_[m.node];
    members_.push_back(m);
    n.member_offset = stream_bytes;
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
  std::vector<uint32_t> node_of_base_;  // per base entry: the node at its path, or kNone
  std::vector<bool> changed_;
  std::vector<bool> emitted_;
  std::vector<bool> in_tail_;  // written at the end, after every base unit
  std::vector<bool> forced_;   // nodes that must be written at the end (make_plan)
  std::vector<bool> repeat_;   // directories written after everything else (make_plan)
  std::vector<uint32_t> repeat_last_;
  std::vector<bool> repack_;         // per base unit: packed again in its place to bound the archive's dead bytes (make_plan)
  std::vector<uint32_t> hot_first_;  // a new learned layout: written first at the end
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> leaders_;  // inode -> first node written
  std::vector<NewMember> members_;                             // live members in stream order
  std::vector<std::optional<uint64_t>> own_header_hash_;       // per node: header_hash(n, kNone), once computed
  std::string cur_;
  uint64_t files_done_ = 0;
  TreeFileOpener opener_{tree_};
};

}  // namespace

Result<IncrementalStats> write_incremental_archive(const std::vector<PackRoot>& roots, const IncrementalBase& base,
                                                   const std::set<std::string>& changed, ByteSink& sink, const PackConfig& config_in) {
  auto start = std::chrono::steady_clock::now();
  PackConfig config = config_in;
  if (!config.warn) config.warn = [](const std::string& m) { std::cerr << "lazycache: warning: " << m << "\n"; };
  if (config.frame_size_bytes < 4096 || config.frame_size_bytes > (512ull << 20))
    return Status(ErrorCode::kInvalidArgument, "frame size must be between 4 KiB and 512 MiB");
  if (config.level < 1 || config.level > 22) return Status(ErrorCode::kInvalidArgument, "zstd level must be between 1 and 22");
  if (!base.index || !base.fetch_frames)
    return Status(ErrorCode::kInvalidArgument, "incremental save needs a base index and a frame fetcher");

  LC_ASSIGN_OR_RETURN(BaseLayout layout, build_layout(*base.index));
  LC_ASSIGN_OR_RETURN(ScannedTree tree, base.tree ? base.tree() : scan_for_pack(roots, config.xattrs, config.warn));
  const double tree_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  IncrementalWriter writer(tree, base, layout, sink, config);
  LC_RETURN_IF_ERROR(writer.run(changed));
  const auto index_start = std::chrono::steady_clock::now();

  IndexModel& model = tree.model;
  model.frames = writer.frames;
  model.hot_nodes = writer.hot_list_;
  model.dead = writer.dead;
  model.tool_version = config.tool_version;
  double commit_s = 0;
  LC_ASSIGN_OR_RETURN(uint64_t tail_bytes, finish_archive(model, sink, config.level, &commit_s));

  IncrementalStats stats = writer.stats;
  stats.phases.tree_s = tree_s;
  stats.phases.commit_s = commit_s;
  stats.phases.index_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - index_start).count() - commit_s;
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
