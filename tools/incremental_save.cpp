// SPDX-License-Identifier: MIT
#include "tools/incremental_save.h"

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <optional>
#include <set>
#include <thread>

#include "format/archive.h"
#include "format/frame_source.h"
#include "format/pack_order.h"
#include "fs/chunk_cache.h"
#include "fs/overlay_changes.h"
#include "fs/overlay_tree.h"
#include "remote/cache_keys.h"
#include "remote/upload_sink.h"
#include "tools/base_entry.h"
#include "tools/kernel_overlay.h"
#include "tools/mount_state.h"
#include "tools/save_chooser.h"
#include "tools/store_options.h"

namespace lazycache::cli {

namespace {

// Adds `path` (an archive path) and every entry of the base below it to `out`.
void add_base_paths_below(const format::Index& index, const std::string& path, std::set<std::string>& out) {
  auto top = index.lookup_path(path);
  if (!top) return;
  std::vector<format::EntryId> todo{*top};
  while (!todo.empty()) {
    const format::EntryId id = todo.back();
    todo.pop_back();
    out.insert(index.path(id));
    if (index.entry(id).type != format::EntryType::kDirectory) continue;
    const auto kids = index.children(id);
    for (uint32_t i = 0; i < kids.count; ++i) todo.push_back(kids.first + i);
  }
}

// The daemon's matched key (the entry it mounted), the same for every record of the group.
Result<std::string> mounted_key(const std::vector<SaveRecord>& records) {
  std::optional<std::string> key;
  for (const SaveRecord& r : records) {
    if (r.pid <= 0) return Status(ErrorCode::kUnsupported, r.path + " was a cache miss (no entry to build on)");
    if (r.state_dir.empty()) return Status(ErrorCode::kUnsupported, r.path + " was mounted read-only");
    auto d = find_daemon(r.path);
    if (!d || d->pid != r.pid || d->key.empty())
      return Status(ErrorCode::kNotFound, "the mount daemon of " + r.path + " does not say which entry it mounted");
    if (key && *key != d->key) return Status(ErrorCode::kUnsupported, "the paths were mounted from different entries");
    key = d->key;
  }
  if (!key) return Status(ErrorCode::kInvalidArgument, "no paths to save");
  return *key;
}

// The chunk cache the mounts filled (the one their daemon used, else the default), if it exists:
// read only (frames the job never read are not worth keeping), and never created by a save.
std::shared_ptr<fs::ChunkCache> existing_chunk_cache(const std::string& recorded) {
  const std::string dir = recorded.empty() ? fs::ChunkCache::default_dir() : recorded;
  struct stat st;
  if (::stat((dir + "/index.mdb").c_str(), &st) != 0) return nullptr;
  auto cache = fs::ChunkCache::open({dir});
  return cache.ok() ? *cache : nullptr;
}

// The merged view's roots as the base knows them: the entry each daemon mounted at each path
// (SaveRecord::base_member). Empty when a record predates that line or names no base directory:
// the caller then scans the mounts.
std::vector<fs::OverlayTreeRoot> overlay_roots(const std::vector<SaveRecord>& records, const format::Index& index) {
  std::vector<fs::OverlayTreeRoot> out;
  for (const SaveRecord& r : records) {
    auto lower = r.base_member.empty() ? std::nullopt : index.lookup_path(r.base_member);
    if (!lower || index.entry(*lower).type != format::EntryType::kDirectory) return {};
    out.push_back(fs::OverlayTreeRoot{r.path, member_name(r), *lower, r.state_dir + "/upper"});
  }
  return out;
}

// The owner a mount reports for archive entries: a daemon not running as root shows them as its
// own (tools/cmd_mount.cpp, FilesystemConfig::owner). /proc/PID is owned by the daemon's user.
std::optional<std::pair<uint32_t, uint32_t>> mount_owner(pid_t pid) {
  struct stat st;
  if (::stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0 || st.st_uid == 0) return std::nullopt;
  return std::make_pair(static_cast<uint32_t>(st.st_uid), static_cast<uint32_t>(st.st_gid));
}

// Copies in the store at once: --concurrency when given, else 8. A copy moves no bytes over the
// runner's link, so more of them than a transfer's streams (4) cost the runner nothing; what
// bounds them is the server's copy rate per request (measured in docs/writable.md).
int copy_concurrency(const remote::PutOptions& put) { return put.concurrency > 0 ? put.concurrency : 8; }

}  // namespace

bool save_crosscheck_enabled() {
  const char* v = std::getenv("LAZYCACHE_SAVE_CROSSCHECK");
  return v && std::string(v) == "1";
}

std::string member_name(const SaveRecord& r) {
  const std::string& m = r.base_member;
  // An index records each root's path, which must end in its member name (format/index.cpp): a
  // path restored under another name is named by its own path.
  if (!m.empty() && r.path.size() > m.size() && r.path.compare(r.path.size() - m.size(), m.size(), m) == 0 &&
      r.path[r.path.size() - m.size() - 1] == '/')
    return m;
  const size_t first_char = r.path.find_first_not_of('/');
  return first_char == std::string::npos ? std::string() : r.path.substr(first_char);
}

std::optional<std::string> saved_path_of(const SaveRecord& r, const std::string& mounted_path) {
  const std::string& from = r.base_member;
  const std::string to = member_name(r);
  if (from.empty() || from == to) return mounted_path;
  if (mounted_path == from) return to;
  if (mounted_path.size() > from.size() && mounted_path.compare(0, from.size(), from) == 0 && mounted_path[from.size()] == '/')
    return to.empty() ? mounted_path.substr(from.size() + 1) : to + mounted_path.substr(from.size());
  return std::nullopt;
}

std::vector<format::PackRoot> save_roots(const std::vector<SaveRecord>& records) {
  std::vector<format::PackRoot> roots;
  for (const SaveRecord& r : records) roots.push_back(format::PackRoot{r.path, member_name(r)});
  return roots;
}

Result<IncrementalSaveCounts> save_incremental(const std::vector<SaveRecord>& records, std::shared_ptr<remote::ObjectStore> store,
                                               const std::string& new_key, const remote::PutOptions& put, const format::PackConfig& pack) {
  const auto start = std::chrono::steady_clock::now();
  LC_ASSIGN_OR_RETURN(std::string key, mounted_key(records));
  // The entry the daemon mounted, by the name mount recorded (older records: the unversioned name).
  std::string object_key = records.front().base_object;
  if (object_key.empty()) {
    LC_ASSIGN_OR_RETURN(object_key, remote::entry_object_key(records.front().scope, key, ""));
  }
  // The base's tail (one ranged GET from a full record: tools/base_entry.h) and the new upload
  // (CreateMultipartUpload, after a HEAD when create-only) are round trips that do not depend
  // on each other: the upload starts on a thread of its own while the base is read. A save
  // that stops before the upload is taken aborts it (the future's value is destroyed unused).
  std::future<Result<std::unique_ptr<remote::MultipartUpload>>> upload_started;
  const char* copy_env = std::getenv("LAZYCACHE_STORE_COPY");  // "0": never ask the store to copy
  const bool copy_off = copy_env && std::string(copy_env) == "0";
  if (!copy_off) upload_started = std::async(std::launch::async, [&store, &new_key, &put] { return store->start_upload(new_key, put); });
  LC_ASSIGN_OR_RETURN(BaseEntry opened, open_base_entry(store, object_key, records.front()));
  std::shared_ptr<const ByteSource> source = opened.source;
  std::shared_ptr<const format::Index> index = opened.reader->shared_index();

  IncrementalSaveCounts counts;
  std::set<std::string> changed;
  const std::vector<format::PackRoot> roots = save_roots(records);
  bool any_in_base = false;
  for (const SaveRecord& r : records) {
    const std::string prefix = member_name(r);
    if (prefix.empty()) return Status(ErrorCode::kUnsupported, "cannot save the file system root");
    any_in_base = any_in_base || index->lookup_path(prefix).has_value();
    std::vector<std::string> moved;
    LC_ASSIGN_OR_RETURN(auto listed, fs::list_upper_changes(r.state_dir + "/upper", &moved));
    for (const auto& rel : listed) changed.insert(prefix + "/" + rel);
    counts.changed_paths += listed.size();
    // A directory a kernel overlay moved shows archive files of another path under this one:
    // whatever the base held here is not what the mount shows.
    for (const auto& rel : moved) add_base_paths_below(*index, prefix + "/" + rel, changed);
  }
  if (!any_in_base) return Status(ErrorCode::kUnsupported, "the mounted entry holds none of the saved paths (restored elsewhere)");

  counts.base_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Opened at the first fetch: a save whose reused frames are all copied by the store reads none,
  // and opening costs an LMDB environment (and a check of index.mdb in a child process when the
  // mount wrote to it: fs/chunk_cache_check.h).
  std::optional<std::shared_ptr<fs::ChunkCache>> opened_cache;
  std::atomic<uint32_t> from_cache{0}, from_store{0};
  format::IncrementalBase base;
  base.index = index;
  // Frames in the chunk cache are taken from there; the rest of the run is read from the store
  // in one read_ranges call, which merges adjacent frames and runs the GETs concurrently
  // (format/frame_source.h). Called from one helper thread only (format/incremental_writer.h).
  base.fetch_frames = [&](uint32_t first, uint32_t last) -> Result<std::string> {
    if (!opened_cache) opened_cache = existing_chunk_cache(records.front().cache_dir);
    format::FrameDataCache& cache = *opened_cache ? static_cast<format::FrameDataCache&>(**opened_cache) : format::no_frame_cache();
    const format::FrameSource frames(*source, index->frames(), cache);
    std::string out(frames.span_bytes(first, last), '\0');
    LC_ASSIGN_OR_RETURN(format::FetchCounts got, frames.fetch(first, last, std::as_writable_bytes(std::span<char>(out))));
    from_cache += got.from_cache;
    from_store += got.from_source;
    return out;
  };

  // Unchanged runs copied by the store where it can; through this process where it cannot.
  std::unique_ptr<ByteSink> sink;
  StoreCopySink* copier = nullptr;
  auto upload = copy_off ? Result<std::unique_ptr<remote::MultipartUpload>>(Status(ErrorCode::kUnsupported, "LAZYCACHE_STORE_COPY=0"))
                         : upload_started.get();
  if (upload.ok()) {
    auto s = std::make_unique<StoreCopySink>(store, std::move(upload).value(), remote::RangeRequest{object_key, 0, 0, opened.object.etag},
                                             std::max<uint64_t>(put.part_size_bytes, 16ull << 20), copy_concurrency(put));
    copier = s.get();
    base.copy_to_sink = [copier](uint64_t offset, uint64_t length) { return copier->copy_range(offset, length); };
    base.copy_min_bytes = copier->min_copy_bytes();
    sink = std::move(s);
    // A save that keeps the base's layout (every save but one that deletes, retypes or
    // repacks something in it) copies all its data frames, every frame but the last (the
    // end-of-archive blocks, written again by every save), as its first run. The store starts
    // on them now, while the tree and the plan are built (on Swift through the hosted link that
    // was 0.2-0.3 s of CPU here before the first copy was sent); a plan that copies less
    // discards what it does not use (StoreCopySink::copy_ahead).
    const auto frames = index->frames();
    if (frames.size() > 1) copier->copy_ahead(0, frames.back().compressed_offset);
  } else if (upload.error().code() == ErrorCode::kUnsupported) {
    counts.no_store_copy = upload.error().message();
    sink = std::make_unique<remote::UploadSink>(store, new_key, put);
  } else {
    return upload.error();
  }

  // Reuse, relayout or a full pack, whichever costs least (tools/save_chooser.h).
  const SaveCostModel model = default_cost_model(pack.threads > 0 ? pack.threads : static_cast<int>(std::thread::hardware_concurrency()));
  base.choose = [&](const format::IncrementalEstimate& est) {
    SaveChoice c = choose_save(est, model);
    counts.plan = c.why;
    return c.choice;
  };
  // The new tree from the base index and upper/ (fs/overlay_tree.h), not a walk of the mounts
  // through FUSE, which was nearly all of the save's time when little changed.
  const std::vector<fs::OverlayTreeRoot> tree_roots = overlay_roots(records, *index);
  if (!tree_roots.empty()) {
    base.tree = [&]() -> Result<format::ScannedTree> {
      auto warn = pack.warn ? pack.warn : [](const std::string& m) { std::cerr << "lazycache: warning: " << m << "\n"; };
      fs::OverlayTreeOptions opts{pack.xattrs, mount_owner(records.front().pid), warn};
      LC_ASSIGN_OR_RETURN(format::ScannedTree tree, fs::merged_overlay_tree(*index, tree_roots, opts));
      if (!save_crosscheck_enabled()) return tree;
      LC_ASSIGN_OR_RETURN(format::ScannedTree scanned, format::scan_for_pack(roots, pack.xattrs, [](const std::string&) {}));
      bool kernel = false;
      for (const SaveRecord& r : records) kernel = kernel || is_kernel_overlay_state(r.state_dir);
      if (std::string diff = fs::scanned_tree_difference(tree, scanned, kernel); !diff.empty())
        return Status(ErrorCode::kInternal, "cross-check: the tree built from upper/ differs from the scan of the mount at " + diff);
      return tree;
    };
  }
  auto written = format::write_incremental_archive(roots, base, changed, *sink, pack);
  if (!written.ok() && written.error().code() == ErrorCode::kCancelled) return Status(ErrorCode::kCancelled, counts.plan);
  // Opened from mount's copy of its tail, the base is checked by the reads, copies and commit
  // pinned to its ETag (tools/base_entry.h): a refusal there is the base replaced since the mount.
  if (!written.ok() && written.error().code() == ErrorCode::kPreconditionFailed && opened.tail_from_mount)
    return Status(ErrorCode::kPreconditionFailed,
                  "the mounted entry " + object_key + " was replaced after it was mounted (" + written.error().message() + ")");
  if (!written.ok()) return written.error();
  counts.stats = *written;
  counts.frames_from_cache = from_cache;
  counts.frames_from_store = from_store;
  if (copier) {
    counts.store_copy = copier->counts();
    counts.no_store_copy = copier->copy_refused();
  }
  return counts;
}

}  // namespace lazycache::cli
