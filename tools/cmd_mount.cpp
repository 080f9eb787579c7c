// SPDX-License-Identifier: MIT
// `lazycache mount`: mount each saved path of a cache entry (or of a local archive) at its place
// and leave a daemon serving them. See docs/mount.md.
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "common/posix_files.h"
#include "format/archive.h"
#include "format/quote.h"
#include "format/root_placement.h"
#include "fs/chunk_cache.h"
#include "fs/filesystem.h"
#include "fs/fuse_adapter.h"
#include "fs/overlay.h"
#include "fs/overlay_fuse.h"
#include "tools/argv_redaction.h"
#include "tools/base_entry.h"
#include "tools/command.h"
#include "tools/fuse_probe.h"
#include "tools/json_output.h"
#include "tools/mount_daemon.h"
#include "tools/mount_point_check.h"
#include "tools/mount_state.h"
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

int run_mount(ArgParser& args) {
  args.option("archive", "FILE", "mount a local archive file instead of a store entry");
  add_store_options(args, StoreUse::kMount);
  add_key_options(args);
  args.flag("foreground", "serve in this process instead of leaving a daemon (Ctrl-C unmounts)");
  args.option("prefetch", "none|hot|all|FILE",
              "what to fetch ahead: the entry's learned hot list (hot), also everything else in the background (all), "
              "the paths listed in FILE then the hot list, or nothing (none: no locality prefetch of a directory's files either)",
              "hot");
  args.option("fill", "auto|all|none|SIZE",
              "how much of the archive to fetch into the chunk cache in the background, behind reads: everything "
              "when it is small against the cache (auto: at most a quarter of --cache-size and 1G), all of it, "
              "nothing, or at most SIZE compressed bytes",
              "auto");
  args.option("cache-dir", "DIR",
              "local chunk cache (default: $LAZYCACHE_CACHE_DIR, ~/.cache/lazycache/chunks, "
              "/var/cache/lazycache/chunks as root)");
  args.option("cache-size", "SIZE", "chunk cache bound; least recently used frames are evicted", "10G");
  args.option("fetch-threads", "N", "range reads in flight", "16");
  args.option("read-timeout", "SECONDS", "a read waiting longer fails with EIO", "30");
  args.flag("read-only", "mount read-only: no upper directory, nothing for unmount --save to save");
  args.flag("writable", "make an --archive mount writable too (store entries are writable by default)");
  args.option("upper-dir", "DIR",
              "where the mount's changes go (default: next to the chunk cache, "
              "CACHE_DIR/../upper/mount-<daemon pid>)");
  args.flag("allow-other", "let other users read the mount (default when run as root)");
  args.flag("allow-nonempty", "mount over a directory that is not empty (its files are hidden, not lost, until unmount)");
  args.flag("json", "print one JSON object (docs/cli.md) instead of the outputs; the summary goes to stderr");
  args.flag("fail-on-cache-miss", "exit 3 when no entry matches (default: leave the paths as plain directories)");
  int code = 0;
  if (!args.parse(code)) return code;

  const bool from_archive = args.has("archive");
  const bool json = args.has("json");
  std::ostream& human = json ? std::cerr : std::cout;  // --json: stdout holds the object only
  const auto started = std::chrono::steady_clock::now();
  if (from_archive == args.has("key")) {
    std::cerr << "lazycache mount: give --key (with --store) or --archive FILE\n";
    return kExitUsage;
  }
  std::vector<std::string> paths;
  for (const auto& p : args.positionals()) paths.push_back(absolute_path(p));
  auto cache_size = args.get_size("cache-size");
  auto budget = args.get_size("memory-budget");
  auto upload_budget = args.get_size("upload-budget");  // checked here; recorded for unmount --save
  auto threads = args.get_int("fetch-threads");
  auto timeout = args.get_int("read-timeout");
  for (const Status& s : {cache_size.status(), budget.status(), upload_budget.status(), threads.status(), timeout.status()}) {
    if (!s.ok()) return report_error("mount", s);
  }
  if (*threads < 1 || *threads > 256 || *timeout < 1) {
    std::cerr << "lazycache mount: --fetch-threads must be 1..256 and --read-timeout at least 1\n";
    return kExitUsage;
  }
  const std::string prefetch = args.get("prefetch");
  if (args.has("allow-other")) {
    if (Status s = check_allow_other(geteuid() == 0); !s.ok()) return report_error("mount", s);
  }
  auto fill = fs::FillPolicy::parse(args.get("fill"));
  if (!fill.ok()) {
    auto cap = args.get_size("fill");
    if (!cap.ok()) {
      std::cerr << "lazycache mount: --fill: expected auto, all, none or a size like 512M, got '" << args.get("fill") << "'\n";
      return kExitUsage;
    }
    fill = fs::FillPolicy{fs::FillPolicy::Mode::kBytes, *cap};
  }

  clean_finished_mounts();  // what ended mounts left in the run directory (tools/run_dir_cleanup.h)
  for (const auto& p : paths) {
    if (clean_stale(p)) std::cerr << "lazycache mount: cleaned up a stale mount at " << p << " (its daemon was gone)\n";
    if (is_lazycache_mount(p)) return report_error("mount", Status(ErrorCode::kAlreadyExists, p + " is already mounted"));
  }

  auto daemon = Daemonizer::start(args.has("foreground"));
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

  std::shared_ptr<const ByteSource> source;
  ServeInfo info;
  std::optional<SaveRecord> record;       // store entries only: what unmount --save needs
  std::optional<ResolvedEntry> resolved;  // store entries only: printed once the mounts serve
  std::string store_name;
  std::string base_etag;  // of the entry mounted
  if (from_archive) {
    auto file = LocalFileSource::open(args.get("archive"));
    if (!file.ok()) return fail(file.error());
    source = std::move(file).value();
    info.archive = args.get("archive");
  } else {
    auto store = open_store(args);
    if (!store.ok()) return fail(store.error());
    // What unmount --save will open, parsed once (tools/save_record.h keeps the typed values).
    auto store_settings = recorded_store_settings(args, StoreUse::kMount);
    if (!store_settings.ok()) return fail(store_settings.error());
    auto entry = resolve_entry(*store, args, paths);
    if (!entry.ok()) return fail(entry.error());
    if (!entry->match) {
      // Saved for other paths: a miss, as actions/cache's version makes it (never their tree here).
      if (std::string why = other_paths_message(*entry, (*store)->describe()); !why.empty())
        std::cerr << "lazycache mount: " << why << "\n";
      Status printed = print_key_outputs(*entry, !json);  // a miss is a complete answer: cache-hit=false
      if (!printed.ok()) return fail(printed);
      if (json)
        std::cout << RestoreJson{.primary_key = entry->primary_key, .store = (*store)->describe(), .mode = "none"}.to_json() << "\n";
      if (args.has("fail-on-cache-miss")) {
        return fail(Status(ErrorCode::kNotFound,
                           "cache miss for key " + entry->primary_key + " in " + (*store)->describe() + " (--fail-on-cache-miss)"));
      }
      for (const auto& p : paths) {
        Status s = make_dirs(p);
        if (!s.ok()) return fail(s);
      }
      for (const auto& p : paths) {
        SaveRecord rec{p, entry->primary_key, args.get("scope"), false, 0, "", *store_settings, ""};
        rec.version = remote::entry_version(paths);  // what this job's save of the paths is named for
        Status recorded = write_save_record(rec);
        if (!recorded.ok()) return fail(recorded.with_context("recording the key for unmount --save"));
      }
      human << "cache miss for key " << entry->primary_key << " in " << (*store)->describe() << ": nothing mounted";
      for (const auto& p : paths) human << ", " << p << " left as a plain directory";
      human << "\n";
      daemon->ready(kExitOk);
      return kExitOk;
    }
    source = open_entry_source(*store, entry->match->object);
    info.archive = (*store)->describe() + " " + entry->match->object.key;
    info.key = entry->match->key;
    resolved = *entry;
    store_name = (*store)->describe();
    base_etag = entry->match->object.etag;
    record = SaveRecord{"", entry->primary_key, args.get("scope"), entry->cache_hit(), ::getpid(), "", *store_settings, ""};
    record->base_object = entry->match->object.key;
  }

  auto counting = std::make_shared<CountingSource>(source);
  auto reader = format::ArchiveReader::open(counting);
  if (!reader.ok()) return fail(reader.error().with_context("opening " + source->describe()));
  const uint64_t mount_reads = counting->reads();
  auto placements = format::place_roots((*reader)->index(), paths);  // the rule restore uses
  if (!placements.ok()) return fail(placements.error());
  // A save of these mounts is named for the mount points, in this order (remote::entry_version).
  if (record) {
    std::vector<std::string> mounted_at;
    for (const auto& pl : *placements) mounted_at.push_back(pl.path);
    record->version = remote::entry_version(mounted_at);
  }
  if (!args.has("allow-nonempty")) {
    for (const auto& pl : *placements) {
      Status empty = require_empty_mountpoint(pl.path);
      if (!empty.ok()) return fail(empty);
    }
  }

  auto cache = fs::ChunkCache::open({args.has("cache-dir") ? args.get("cache-dir") : fs::ChunkCache::default_dir(), *cache_size});
  if (!cache.ok() && cache.error().code() == ErrorCode::kResourceExhausted) {
    // A full disk must not fail the job: every read goes to the store instead.
    std::cerr << "lazycache mount: warning: " << cache.error().to_string() << "; mounting without the chunk cache\n";
    cache = std::shared_ptr<fs::ChunkCache>();
  }
  if (!cache.ok()) return fail(cache.error());

  fs::FilesystemConfig config;
  config.memory_budget_bytes = *budget;
  config.fill = *fill;
  config.cache_bound_bytes = *cache_size;
  config.fetcher.threads = static_cast<int>(*threads);
  config.read_timeout_ms = static_cast<uint64_t>(*timeout) * 1000;
  config.mount_range_reads = mount_reads;
  // "nothing ahead" means no speculative fetch at all: no locality prefetch either.
  if (prefetch == "none") config.directory_prefetch_frames = 0;
  if (geteuid() != 0) config.owner = std::make_pair(static_cast<uint32_t>(getuid()), static_cast<uint32_t>(getgid()));
  fs::Filesystem filesystem(std::move(reader).value(), *cache, config);

  // Say why up front when this machine cannot mount (tools/fuse_probe.h), not a libfuse error.
  if (FuseProbeResult probe = probe_fuse({.trial_mount = false}); !probe.usable) {
    return fail(
        Status(ErrorCode::kUnsupported, "FUSE cannot be used here: " + probe.reason + " (lazycache restore --mode auto extracts instead)"));
  }
  // Writable (the default): one overlay per mount point, its state under --upper-dir or next to
  // the chunk cache. Declared before `mounts`, so every mount is gone before its overlay.
  std::vector<std::unique_ptr<fs::Overlay>> overlays;
  const std::string cache_dir = args.has("cache-dir") ? args.get("cache-dir") : fs::ChunkCache::default_dir();
  const std::string upper_base = args.has("upper-dir") ? absolute_path(args.get("upper-dir"))
                                                       : absolute_path(cache_dir + "/..") + "/upper/mount-" + std::to_string(::getpid());
  std::vector<std::unique_ptr<fs::FuseMount>> mounts;
  for (const auto& pl : *placements) {
    Status s = make_dirs(pl.path);
    if (!s.ok()) return fail(s);
    fs::FuseMountConfig mc;
    mc.mountpoint = pl.path;
    mc.root = pl.root;
    mc.allow_other = geteuid() == 0 || args.has("allow-other");
    std::string state_dir;
    // A local --archive has no key to save under: read-only unless asked, as before.
    if (!args.has("read-only") && (!from_archive || args.has("writable"))) {
      state_dir = placements->size() == 1 ? upper_base : upper_base + "/" + std::to_string(mounts.size());
      auto overlay = fs::Overlay::open(filesystem, pl.root, fs::OverlayConfig{state_dir});
      if (!overlay.ok()) return fail(overlay.error().with_context("upper directory " + state_dir));
      overlays.push_back(std::move(overlay).value());
    }
    if (record) {
      SaveRecord r = *record;
      r.path = pl.path;
      r.state_dir = state_dir;
      r.cache_dir = absolute_path(cache_dir);  // the incremental save reads base frames from it
      r.xattrs = xattrs_to_keep(filesystem.index());
      r.base_etag = base_etag;
      r.base_member = filesystem.index().path(pl.root);
      r.base_size = source->size();
      r.base_tail = base_tail_bytes(filesystem.index(), source->size());
      Status recorded = write_save_record(r);
      if (!recorded.ok()) return fail(recorded.with_context("recording the key for unmount --save"));
    }
    auto m = state_dir.empty() ? fs::FuseMount::mount(filesystem, mc) : fs::mount_overlay(*overlays.back(), mc);
    if (!m.ok()) return fail(m.error());  // mounts made so far are detached by their destructors
    daemon->note_mounted(pl.path);
    (*m)->start();
    mounts.push_back(std::move(m).value());
  }

  std::vector<std::string> first;
  fs::PrefetchMode mode = fs::PrefetchMode::kHotList;
  if (prefetch == "none") mode = fs::PrefetchMode::kNone;
  else if (prefetch == "all") mode = fs::PrefetchMode::kAll;
  else if (prefetch != "hot") {
    auto list = read_path_list(prefetch);
    if (!list.ok()) return fail(list.error());
    for (const auto& p : *list) first.push_back(to_archive_path(p, *placements, filesystem.index()));
  }
  const size_t missing = filesystem.start_prefetch(mode, first);
  if (missing > 0) std::cerr << "lazycache mount: " << missing << " prefetch paths are not in the archive (skipped)\n";

  const auto& totals = filesystem.index().totals();
  for (const auto& m : mounts) {
    // The root path (and, with no PATH given, the mount point) come from the archive: quoted
    // when they hold control bytes, like every name lazycache prints.
    human << "mounted " << format::quote_path_if_needed(filesystem.index().path(m->config().root)) << " of " << info.archive << " at "
          << format::quote_path_if_needed(m->mountpoint()) << "\n";
  }
  human << "  " << totals.file_count << " files, " << human_bytes(totals.file_bytes) << " in " << human_bytes(source->size())
        << "; ready after " << mount_reads << " range reads" << (daemon->foreground() ? "" : "; daemon pid " + std::to_string(getpid()))
        << "\n";
  // The outputs only now that every mount serves: a failed mount must never tell the workflow
  // cache-hit=true.
  if (resolved) {
    Status printed = print_key_outputs(*resolved, !json);
    if (!printed.ok()) return fail(printed);
  }
  if (json) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
    std::cout << RestoreJson{resolved ? resolved->primary_key : "",
                             info.key,
                             store_name,
                             resolved && resolved->cache_hit(),
                             "mount",
                             totals.file_count,
                             totals.file_bytes,
                             source->size(),
                             0,
                             static_cast<uint64_t>(ms)}
                     .to_json()
              << std::endl;
  }
  daemon->ready(kExitOk);
  redact_own_store_env();  // the store is open and recorded: /proc/PID/environ shows no secret
  // Keeps RUN_DIR/mount-<pid>.access.live current, so `unmount --save` can write the files the
  // job read first, in order, before it unmounts (the final .access comes only after).
  std::jthread access_writer([&filesystem](std::stop_token stop) {
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
  return serve(filesystem, mounts, info);
}

const CommandRegistration reg{"mount", "mount a cache entry's saved paths (lazily fetched through FUSE)",
                              "[--store URL] --key K [--restore-keys P]... [PATH...]\n"
                              "       lazycache mount --archive FILE [PATH...]",
                              run_mount};

}  // namespace
}  // namespace lazycache::cli
