// SPDX-License-Identifier: MIT
// `lazycache mount`: mount each saved path of a cache entry (or of a local archive) at its place
// and leave a daemon serving them: read-only FUSE mounts, writable ones through the daemon's own
// overlay or (as root) a kernel overlayfs over a read-only FUSE mount. See docs/mount.md.
#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "common/posix_files.h"
#include "format/archive.h"
#include "format/quote.h"
#include "format/root_placement.h"
#include "fs/chunk_cache.h"
#include "fs/filesystem.h"
#include "fs/fuse_adapter.h"
#include "fs/overlay.h"
#include "fs/overlay_fuse.h"
#include "fs/tree_warmer.h"
#include "remote/object_byte_source.h"
#include "tools/argv_redaction.h"
#include "tools/base_entry.h"
#include "tools/cmd_mount.h"
#include "tools/command.h"
#include "tools/fuse_probe.h"
#include "tools/json_output.h"
#include "tools/kernel_overlay.h"
#include "tools/mount_daemon.h"
#include "tools/mount_point_check.h"
#include "tools/mount_state.h"
#include "tools/overlay_open_feed.h"
#include "tools/run_dir_cleanup.h"
#include "tools/run_files.h"
#include "tools/save_record.h"
#include "tools/store_options.h"

namespace lazycache::cli {
namespace {

using Placement = format::RootPlacement;
Result<std::vector<std::string>> read_path_list(const std::string& file) {
  std::ifstream in(file);
  if (!in) return Status(ErrorCode::kNotFound, "cannot read prefetch list " + file);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

// Absolute paths under a placement become archive paths ("/ws/node_modules/x" -> "ws/.../x");
// anything else is taken as an archive path already.
std::string to_archive_path(const std::string& p, const std::vector<Placement>& placements, const format::Index& index) {
  for (const auto& pl : placements) {
    if (p == pl.path || p.rfind(pl.path + "/", 0) == 0) {
      std::string root = index.path(pl.root);
      return root + p.substr(pl.path.size());
    }
  }
  return p[0] == '/' ? p.substr(1) : p;
}

// What is mounted: the archive's bytes and, for a store entry, what the outputs and the save
// records need.
struct MountSource {
  std::shared_ptr<const ByteSource> bytes;
  // A store entry's bytes (== bytes): its requests() are the range reads the mount cost.
  std::shared_ptr<remote::ObjectByteSource> object;
  ServeInfo info;
  std::optional<SaveRecord> record;       // store entries only: what unmount --save needs
  std::optional<ResolvedEntry> resolved;  // store entries only: printed once the mounts serve
  std::string store_name;
  std::string base_etag;  // of the entry mounted
  // The end of the entry an incremental save reads to open it (tools/base_entry.h), taken from
  // the lookup's tail before it is released; empty when that tail does not hold it all. Written
  // next to each writable mount's upper directory, then dropped.
  std::string base_tail_copy;
};

// What ended mounts left behind is cleaned up; a path still mounted is kAlreadyExists.
Status check_mount_points(const MountOptions& o) {
  clean_finished_mounts();  // what ended mounts left in the run directory (tools/run_dir_cleanup.h)
  for (const auto& p : o.paths) {
    if (clean_stale(p)) std::cerr << "lazycache mount: cleaned up a stale mount at " << p << " (its daemon was gone)\n";
    if (is_lazycache_mount(p)) return Status(ErrorCode::kAlreadyExists, p + " is already mounted");
  }
  return Status();
}

Result<MountSource> open_archive_file(const MountOptions& o) {
  LC_ASSIGN_OR_RETURN(auto file, LocalFileSource::open(o.archive));
  MountSource src;
  src.bytes = std::move(file);
  src.info.archive = o.archive;
  return src;
}

// A store entry that matched: its bytes, and the save record every mount point's is made from.
// `entry` is taken whole: its tail (up to kEntryTailBytes) moves on to the archive's source.
Result<MountSource> open_matched_entry(const MountOptions& o, const std::shared_ptr<remote::ObjectStore>& store, ResolvedEntry entry,
                                       const StoreSettings& recorded) {
  MountSource src;
  const remote::ObjectInfo& object = entry.match->object;
  std::string tail = std::move(entry.tail);
  if (tail.empty() && object.size > 0) {
    // Found by listing (a restore key): the same tail in one read, pinned to the listed ETag.
    tail.assign(std::min<uint64_t>(kEntryTailBytes, object.size), '\0');
    auto pinned = remote::ObjectByteSource::from_info(store, object);
    auto n = pinned->read_at(object.size - tail.size(), std::as_writable_bytes(std::span<char>(tail)));
    if (!n.ok()) return n.error().with_context("reading the archive tail of " + pinned->describe());
    if (*n != tail.size()) return Status(ErrorCode::kCorrupt, "short read of the archive tail of " + pinned->describe());
  }
  LC_ASSIGN_OR_RETURN(src.object, remote::ObjectByteSource::from_tail(store, object, std::move(tail)));
  src.bytes = src.object;
  src.info.archive = store->describe() + " " + entry.match->object.key;
  src.info.key = entry.match->key;
  src.store_name = store->describe();
  src.base_etag = entry.match->object.etag;
  src.record = SaveRecord{"", entry.primary_key, o.key.scope, entry.cache_hit(), ::getpid(), "", recorded, ""};
  src.record->base_object = entry.match->object.key;
  src.resolved = std::move(entry);  // last: `object` refers into it
  return src;
}

// A miss: the outputs say cache-hit=false, and the paths are left plain directories with a save
// record each (the job's save of them is named for this key). kNotFound with --fail-on-cache-miss.
Status leave_plain_directories(const MountOptions& o, const ResolvedEntry& entry, const std::string& store_name,
                               const StoreSettings& recorded) {
  // Saved for other paths: a miss, as actions/cache's version makes it (never their tree here).
  if (std::string why = other_paths_message(entry, store_name); !why.empty()) std::cerr << "lazycache mount: " << why << "\n";
  LC_RETURN_IF_ERROR(print_key_outputs(entry, !o.json));  // a miss is a complete answer: cache-hit=false
  if (o.json) std::cout << RestoreJson{.primary_key = entry.primary_key, .store = store_name, .mode = "none"}.to_json() << "\n";
  if (o.fail_on_cache_miss)
    return Status(ErrorCode::kNotFound, "cache miss for key " + entry.primary_key + " in " + store_name + " (--fail-on-cache-miss)");
  for (const auto& p : o.paths) LC_RETURN_IF_ERROR(make_dirs(p));
  for (const auto& p : o.paths) {
    SaveRecord rec{p, entry.primary_key, o.key.scope, false, 0, "", recorded, ""};
    rec.version = remote::entry_version(o.paths);  // what this job's save of the paths is named for
    LC_RETURN_IF_ERROR(write_save_record(rec).with_context("recording the key for unmount --save"));
  }
  std::ostream& human = o.json ? std::cerr : std::cout;
  human << "cache miss for key " << entry.primary_key << " in " << store_name << ": nothing mounted";
  for (const auto& p : o.paths) human << ", " << p << " left as a plain directory";
  human << "\n";
  return Status();
}

// The chunk cache; on a full disk none (every read goes to the store: a full disk must not fail
// the job).
Result<std::shared_ptr<fs::ChunkCache>> open_chunk_cache(const MountOptions& o) {
  auto cache = fs::ChunkCache::open({o.cache_dir, o.cache_size_bytes});
  if (!cache.ok() && cache.error().code() == ErrorCode::kResourceExhausted) {
    std::cerr << "lazycache mount: warning: " << cache.error().to_string() << "; mounting without the chunk cache\n";
    return std::shared_ptr<fs::ChunkCache>();
  }
  return cache;
}

fs::FilesystemConfig filesystem_config(const MountOptions& o, uint64_t mount_reads) {
  fs::FilesystemConfig config;
  config.memory_budget_bytes = o.memory_budget_bytes;
  config.fill = o.fill;
  config.decode_ahead_bytes = o.decode_ahead_bytes;
  config.cache_bound_bytes = o.cache_size_bytes;
  config.fetcher.threads = o.fetch_threads;
  config.read_timeout_ms = o.read_timeout_ms;
  config.mount_range_reads = mount_reads;
  // "nothing ahead" means no speculative fetch at all: no locality prefetch either.
  if (o.prefetch == fs::PrefetchMode::kNone) config.directory_prefetch_frames = 0;
  if (geteuid() != 0) config.owner = std::make_pair(static_cast<uint32_t>(getuid()), static_cast<uint32_t>(getgid()));
  return config;
}

// The mounts and the overlays of the writable ones. Declared in this order, so every mount is
// gone before its overlay; mounts made before a failure are detached by their destructors.
struct Mounts {
  std::vector<std::unique_ptr<fs::Overlay>> overlays;
  std::vector<std::unique_ptr<fs::FuseMount>> mounts;
  // The mounts under a kernel overlay (tools/kernel_overlay.h): what the open feed follows.
  std::vector<OverlayOpenFeed::Root> kernel_overlays;
  // Per mount: what its tree walk lists. Invalid: the mount point. Under a kernel overlay: the
  // root of the detached FUSE mount below it, so the walk's names go to the FUSE mount (no request
  // to the daemon when the job looks them up through the overlay) and the overlay holds only the
  // inodes the job used (its unmount drops them all first: +49 ms on node's tree when the walk
  // listed it through the overlay, session 38). Closed once the walks have started.
  std::vector<UniqueFd> walk_roots;
};

// Whether writable mounts try a kernel overlay first: asked for, or by default as root with an
// upper directory of our own (a --upper-dir may hold the FUSE overlay's whiteouts of a
// previous mount, which overlayfs would show as files).
bool wants_kernel_overlay(const MountOptions& o) {
  using Kind = MountOptions::OverlayKind;
  return o.overlay == Kind::kKernel || (o.overlay == Kind::kAuto && ::geteuid() == 0 && o.upper_dir.empty());
}

// A writable mount as a kernel overlay over a read-only FUSE mount. Errors: the overlay's (the
// FUSE mount is gone again then).
// The read-only FUSE mount and the overlay over it; `lower_root` gets a descriptor of the FUSE
// mount's root (O_PATH), the only way to it once it is detached.
Result<std::unique_ptr<fs::FuseMount>> mount_under_kernel_overlay(fs::Filesystem& filesystem, fs::FuseMountConfig mc,
                                                                  const std::string& state_dir, UniqueFd& lower_root) {
  const KernelOverlayDirs dirs = kernel_overlay_dirs(state_dir);
  LC_ASSIGN_OR_RETURN(fs::Attr root, filesystem.getattr(mc.root));
  LC_RETURN_IF_ERROR(prepare_kernel_overlay(dirs, root));
  mc.mount_at = dirs.lower;
  LC_ASSIGN_OR_RETURN(auto m, fs::FuseMount::mount(filesystem, mc));
  m->start();
  // Resolving the mount's root sends no request (the kernel made it at mount time).
  lower_root = UniqueFd(::open(dirs.lower.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (Status s = mount_kernel_overlay(dirs, mc.mountpoint); !s.ok()) {
    lower_root.reset();  // before m's destructor detaches the FUSE mount and waits for its end
    return s;
  }
  return m;
}

// What unmount --save needs of the mount at `pl` (tools/save_record.h).
Status record_for_save(const MountSource& src, const fs::Filesystem& filesystem, const Placement& pl, const std::string& state_dir,
                       bool own_state_dir, const std::string& cache_dir) {
  SaveRecord r = *src.record;
  r.path = pl.path;
  r.state_dir = state_dir;
  r.cache_dir = absolute_path(cache_dir);  // the incremental save reads base frames from it
  r.xattrs = xattrs_to_keep(filesystem.index());
  r.base_etag = src.base_etag;
  r.base_member = filesystem.index().path(pl.root);
  r.base_size = src.bytes->size();
  r.base_tail = base_tail_bytes(filesystem.index(), src.bytes->size());
  // Only into a state directory of our own (a --upper-dir is the user's), and only as a shortcut:
  // without it the save reads the tail from the store as before.
  if (!src.base_tail_copy.empty() && !state_dir.empty() && own_state_dir) {
    auto digest = keep_base_tail_copy(state_dir, src.base_tail_copy);
    if (digest.ok()) r.base_tail_digest = *digest;
  }
  return write_save_record(r).with_context("recording the key for unmount --save");
}

// One FUSE mount per placement, writable (an overlay, its state under --upper-dir or next to the
// chunk cache) unless read-only; each started as soon as it is mounted.
Status mount_all(const MountOptions& o, fs::Filesystem& filesystem, const std::vector<Placement>& placements, const MountSource& src,
                 Daemonizer& daemon, Mounts& out) {
  const std::string upper_base = !o.upper_dir.empty() ? o.upper_dir
                                                      : absolute_path(o.cache_dir + "/..") + "/upper/mount-" + std::to_string(::getpid());
  bool kernel_overlay = o.writable_mount() && wants_kernel_overlay(o);
  if (kernel_overlay) {
    // Before the first overlay shows: `status` and `unmount` find its daemon from then on.
    std::vector<std::string> paths;
    for (const auto& pl : placements) paths.push_back(pl.path);
    LC_RETURN_IF_ERROR(announce_mounts(paths, src.info).with_context("writing the mount's state file"));
  }
  for (const auto& pl : placements) {
    LC_RETURN_IF_ERROR(make_dirs(pl.path));
    fs::FuseMountConfig mc;
    mc.mountpoint = pl.path;
    mc.root = pl.root;
    mc.allow_other = geteuid() == 0 || o.allow_other;
    mc.kernel_opens = o.kernel_opens;  // the read-only table's; an overlay must see every open (copy-up)
    std::string state_dir;
    if (o.writable_mount()) state_dir = placements.size() == 1 ? upper_base : upper_base + "/" + std::to_string(out.mounts.size());
    if (kernel_overlay) {
      UniqueFd lower_root;
      auto m = mount_under_kernel_overlay(filesystem, mc, state_dir, lower_root);
      if (m.ok()) {
        daemon.note_mounted(pl.path);
        if (src.record) LC_RETURN_IF_ERROR(record_for_save(src, filesystem, pl, state_dir, o.upper_dir.empty(), o.cache_dir));
        out.kernel_overlays.push_back({pl.path, filesystem.index().path(pl.root)});
        out.mounts.push_back(std::move(m).value());
        out.walk_roots.push_back(std::move(lower_root));  // invalid if it could not be opened: the overlay is walked
        continue;
      }
      if (o.overlay == MountOptions::OverlayKind::kKernel) return m.error();
      // auto: the daemon's own overlay serves the same tree, only slower; said once.
      std::cerr << "lazycache mount: " << m.error().to_string() << "; using the FUSE overlay instead\n";
      kernel_overlay = false;
    }
    // A local --archive has no key to save under: read-only unless asked, as before.
    if (o.writable_mount()) {
      auto overlay = fs::Overlay::open(filesystem, pl.root, fs::OverlayConfig{state_dir});
      if (!overlay.ok()) return overlay.error().with_context("upper directory " + state_dir);
      out.overlays.push_back(std::move(overlay).value());
    }
    if (src.record) LC_RETURN_IF_ERROR(record_for_save(src, filesystem, pl, state_dir, o.upper_dir.empty(), o.cache_dir));
    LC_ASSIGN_OR_RETURN(auto m, state_dir.empty() ? fs::FuseMount::mount(filesystem, mc) : fs::mount_overlay(*out.overlays.back(), mc));
    daemon.note_mounted(pl.path);
    m->start();
    out.mounts.push_back(std::move(m));
    out.walk_roots.emplace_back();  // walked at its mount point
  }
  return Status();
}

// --prefetch: the hot list, everything, nothing, or a file's paths first.
Status start_prefetch(const MountOptions& o, fs::Filesystem& filesystem, const std::vector<Placement>& placements) {
  std::vector<std::string> first;
  if (!o.prefetch_list.empty()) {
    LC_ASSIGN_OR_RETURN(auto list, read_path_list(o.prefetch_list));
    for (const auto& p : list) first.push_back(to_archive_path(p, placements, filesystem.index()));
  }
  const size_t missing = filesystem.start_prefetch(o.prefetch, first);
  if (missing > 0) std::cerr << "lazycache mount: " << missing << " prefetch paths are not in the archive (skipped)\n";
  return Status();
}

// The summary, then the outputs (only now that every mount serves: a failed mount must never
// tell the workflow cache-hit=true) and with --json the object.
Status print_mounted(const MountOptions& o, const fs::Filesystem& filesystem, const Mounts& mounted, const MountSource& src,
                     uint64_t mount_reads, bool foreground, std::chrono::steady_clock::time_point started) {
  std::ostream& human = o.json ? std::cerr : std::cout;  // --json: stdout holds the object only
  const auto& totals = filesystem.index().totals();
  for (const auto& m : mounted.mounts) {
    // The root path (and, with no PATH given, the mount point) come from the archive: quoted
    // when they hold control bytes, like every name lazycache prints.
    human << "mounted " << format::quote_path_if_needed(filesystem.index().path(m->config().root)) << " of " << src.info.archive << " at "
          << format::quote_path_if_needed(m->mountpoint()) << "\n";
  }
  human << "  " << totals.file_count << " files, " << human_bytes(totals.file_bytes) << " in " << human_bytes(src.bytes->size())
        << "; ready after " << mount_reads << " range reads" << (foreground ? "" : "; daemon pid " + std::to_string(getpid())) << "\n";
  if (src.resolved) LC_RETURN_IF_ERROR(print_key_outputs(*src.resolved, !o.json));
  if (o.json) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
    std::cout << RestoreJson{src.resolved ? src.resolved->primary_key : "",
                             src.info.key,
                             src.store_name,
                             src.resolved && src.resolved->cache_hit(),
                             "mount",
                             totals.file_count,
                             totals.file_bytes,
                             src.bytes->size(),
                             0,
                             static_cast<uint64_t>(ms)}
                     .to_json()
              << std::endl;
  }
  return Status();
}

// Keeps RUN_DIR/mount-<pid>.access.live current, so `unmount --save` can write the files the
// job read first, in order, before it unmounts (the final .access comes only after).
std::jthread keep_access_list_current(const fs::Filesystem& filesystem) {
  return std::jthread([&filesystem](std::stop_token stop) {
    const std::string file = run_dir() + "/mount-" + std::to_string(::getpid()) + ".access.live";
    size_t written = 0;
    std::mutex mu;
    std::condition_variable_any cv;
    while (!stop.stop_requested()) {
      std::vector<format::EntryId> order = filesystem.access_order();
      if (order.size() != written) {
        std::string text;
        for (format::EntryId id : order) text += filesystem.index().path(id) + "\n";
        ignore_error(write_run_file(file, text), "the hot list is an optimisation");
        written = order.size();
      }
      std::unique_lock lock(mu);
      cv.wait_for(lock, stop, std::chrono::seconds(1), [] { return false; });
    }
  });
}

// The directories of the hot list's files below `root`, relative to it, in first-open order:
// what the tree walk lists first (fs/tree_warmer.h), so the job finds them listed.
std::vector<std::string> hot_directories(const format::Index& index, format::EntryId root) {
  const std::string base = index.path(root);
  std::vector<std::string> dirs;
  std::unordered_set<format::EntryId> seen;
  for (format::EntryId id : index.hot_list()) {
    const format::EntryId dir = index.entry(id).parent;
    if (!seen.insert(dir).second) continue;
    const std::string p = index.path(dir);
    if (p == base) dirs.emplace_back();
    else if (base.empty()) dirs.push_back(p);
    else if (p.size() > base.size() && p.compare(0, base.size(), base) == 0 && p[base.size()] == '/')
      dirs.push_back(p.substr(base.size() + 1));
  }
  return dirs;
}

int run_mount_command(ArgParser& args) {
  add_mount_options(args);
  int code = 0;
  if (!args.parse(code)) return code;
  auto options = parse_mount_options(args);
  if (!options.ok()) return report_error("mount", options.error());
  return run_mount(*options);
}

const CommandRegistration reg{"mount", "mount a cache entry's saved paths (lazily fetched through FUSE)",
                              "[--store URL] --key K [--restore-keys P]... [PATH...]\n"
                              "       lazycache mount --archive FILE [PATH...]",
                              run_mount_command};

}  // namespace

int run_mount(const MountOptions& o) {
  const auto started = std::chrono::steady_clock::now();
  if (o.allow_other) {
    if (Status s = check_allow_other(geteuid() == 0); !s.ok()) return report_error("mount", s);
  }
  if (Status s = check_mount_points(o); !s.ok()) return report_error("mount", s);

  auto daemon = Daemonizer::start(o.foreground);
  if (daemon.ok() && daemon->in_parent()) return daemon->parent_exit_code();  // the child's startup, relayed
  // Frame buffers (MiBs each) always come from mmap and go back to the system when freed: with
  // glibc's sliding threshold they would land in per-thread arenas after the first free, and
  // the daemon's RSS would keep the high-water mark of every fetch thread's arena.
  ::mallopt(M_MMAP_THRESHOLD, 256 << 10);
  if (!daemon.ok()) return report_error("mount", daemon.error());
  auto fail = [&](const Status& s) {
    int rc = report_error("mount", s);
    daemon->ready(rc);
    return rc;
  };

  MountSource src;
  if (!o.archive.empty()) {
    auto file = open_archive_file(o);
    if (!file.ok()) return fail(file.error());
    src = std::move(file).value();
  } else {
    auto store = open_store(o.store);
    if (!store.ok()) return fail(store.error());
    // What unmount --save will open, typed (tools/save_record.h), URLs redacted.
    const StoreSettings recorded = settings_for_record(o.store);
    auto entry = resolve_entry(*store, o.key, o.paths, EntryUse::kUse, kEntryTailBytes);
    if (!entry.ok()) return fail(entry.error());
    if (!entry->match) {
      if (Status s = leave_plain_directories(o, *entry, (*store)->describe(), recorded); !s.ok()) return fail(s);
      daemon->ready(kExitOk);
      return kExitOk;
    }
    auto matched = open_matched_entry(o, *store, std::move(entry).value(), recorded);
    if (!matched.ok()) return fail(matched.error());
    src = std::move(matched).value();
  }

  // Range reads to mount: a store entry's requests (the lookup's tail read included; reads it
  // already holds are free), a local file's reads.
  auto counting = std::make_shared<CountingSource>(src.bytes);
  auto reader = format::ArchiveReader::open(counting);
  // A lookup's tail that does not parse may be a bad transfer: read once more from the store
  // before the entry is called corrupt (as restore --extract does).
  if (!reader.ok() && reader.error().code() == ErrorCode::kCorrupt && src.object) {
    src.object->release_tail();
    reader = format::ArchiveReader::open(counting);
  }
  if (!reader.ok()) return fail(reader.error().with_context("opening " + src.bytes->describe()));
  const uint64_t mount_reads = src.object ? src.object->requests() : counting->reads();
  if (src.record && src.object && o.writable_mount()) {
    const uint64_t size = src.object->size();
    const uint64_t len = base_tail_read_length(size, base_tail_bytes((*reader)->index(), size));
    const std::string_view held = src.object->held_tail();
    if (held.size() >= len) src.base_tail_copy.assign(held.substr(held.size() - len));
  }
  if (src.object) src.object->release_tail();                          // the index is parsed; no fetch thread exists yet
  auto placements = format::place_roots((*reader)->index(), o.paths);  // the rule restore uses
  if (!placements.ok()) return fail(placements.error());
  // A save of these mounts is named for the mount points, in this order (remote::entry_version).
  if (src.record) {
    std::vector<std::string> mounted_at;
    for (const auto& pl : *placements) mounted_at.push_back(pl.path);
    src.record->version = remote::entry_version(mounted_at);
  }
  if (!o.allow_nonempty) {
    for (const auto& pl : *placements) {
      if (Status empty = require_empty_mountpoint(pl.path); !empty.ok()) return fail(empty);
    }
  }

  auto cache = open_chunk_cache(o);
  if (!cache.ok()) return fail(cache.error());
  fs::Filesystem filesystem(std::move(reader).value(), *cache, filesystem_config(o, mount_reads));

  // Say why up front when this machine cannot mount (tools/fuse_probe.h), not a libfuse error.
  if (FuseProbeResult probe = probe_fuse({.trial_mount = false}); !probe.usable) {
    return fail(
        Status(ErrorCode::kUnsupported, "FUSE cannot be used here: " + probe.reason + " (lazycache restore --mode auto extracts instead)"));
  }
  Mounts mounted;
  if (Status s = mount_all(o, filesystem, *placements, src, *daemon, mounted); !s.ok()) return fail(s);
  std::string().swap(src.base_tail_copy);  // written where the saves look for it
  if (Status s = start_prefetch(o, filesystem, *placements); !s.ok()) return fail(s);
  // Under kernel overlays the daemon sees no open: fanotify tells it which files the job opens,
  // from before the command returns (the job's first opens are the hot list's first files).
  std::unique_ptr<OverlayOpenFeed> open_feed;
  if (!mounted.kernel_overlays.empty()) {
    auto feed = OverlayOpenFeed::start(filesystem, mounted.kernel_overlays);
    if (feed.ok()) open_feed = std::move(feed).value();
    else
      std::cerr << "lazycache mount: cannot follow the job's opens: " << feed.error().to_string()
                << " (the next save has no learned order)\n";
  }
  if (Status s = print_mounted(o, filesystem, mounted, src, mount_reads, daemon->foreground(), started); !s.ok()) return fail(s);
  daemon->ready(kExitOk);
  redact_own_store_env();  // the store is open and recorded: /proc/PID/environ shows no secret
  std::jthread access_writer = keep_access_list_current(filesystem);
  // Now that the mount serves and the command has returned: the job's lookups start meanwhile.
  std::vector<std::unique_ptr<fs::TreeWarmer>> warmers;
  if (o.warm_names > 0) {
    for (size_t i = 0; i < mounted.mounts.size(); ++i) {
      const auto& m = mounted.mounts[i];
      filesystem.walk_started();
      fs::TreeWarmHooks hooks{[&filesystem] { filesystem.walk_listed(); },
                              [&filesystem](bool finished) { filesystem.walk_ended(finished); }};
      warmers.push_back(std::make_unique<fs::TreeWarmer>(m->mountpoint(), o.warm_names,
                                                         hot_directories(filesystem.index(), m->config().root), std::move(hooks),
                                                         std::move(mounted.walk_roots[i])));
    }
  }
  // A detached FUSE mount must not outlive its overlay because of a descriptor the daemon holds:
  // its end is how the daemon learns of the unmount.
  mounted.walk_roots.clear();
  std::function<void()> flush_opens;
  if (open_feed) flush_opens = [&open_feed] { open_feed->flush(); };
  return serve(filesystem, mounted.mounts, warmers, src.info, flush_opens);
}
}  // namespace lazycache::cli
