// SPDX-License-Identifier: MIT
// `lazycache restore --key K [--restore-keys P]... PATH...`: find the entry like actions/cache
// (exact key, else the newest entry of the first matching prefix), then mount it when FUSE is
// usable (run_mount() with the same key and store options, typed: tools/cmd_restore.h) or
// extract it: concurrent range reads (ObjectByteSource) -> frame verification and decompression
// -> files, a pipeline in format/extractor. Says which it does and why.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "format/archive.h"
#include "format/archive_head.h"
#include "format/extractor.h"
#include "format/root_placement.h"
#include "remote/cache_keys.h"
#include "remote/object_byte_source.h"
#include "tools/cmd_mount.h"
#include "tools/cmd_restore.h"
#include "tools/command.h"
#include "tools/early_head.h"
#include "tools/extract_options.h"
#include "tools/fuse_probe.h"
#include "tools/json_output.h"
#include "tools/mount_point_check.h"
#include "tools/mount_state.h"
#include "tools/progress.h"
#include "tools/restore_timeline.h"
#include "tools/store_options.h"

namespace lazycache::cli {
namespace {

// Why FUSE cannot be used here, or "": the device, the kernel and the mount permission
// (tools/fuse_probe.h; a trial mount catches containers that deny mount(2)).
std::string fuse_unusable_reason() { return probe_fuse().reason; }

// The matched entry opened for a full extract: its source and its index.
// Exact hit: the lookup read the entry's last kEntryTailBytes instead of a HEAD (as mount does),
// so the index is in hand with the lookup; the tail is then dropped, so that every frame comes
// from the store and a frame that fails its digest is read again from there (FrameSource), not
// from a copy that a bad transfer may have spoiled. An archive that the tail holds whole is not
// read again: its frames are copied from a head made of those bytes, and one that fails its
// digest is read from the store (format/frame_pipeline.h's rule for a head). A tail that does not parse as an archive's
// is read once more from the store for the same reason, before the entry is called corrupt.
// Otherwise (a restore key's match, found by listing; a tail that did not parse): the first wave
// of frames is read while the tail is (format/archive_head.h), instead of a round trip or two
// after it, and the tail in one read of kEntryTailBytes.
struct OpenedEntry {
  std::shared_ptr<remote::ObjectByteSource> source;
  std::unique_ptr<format::ArchiveReader> reader;
};
// `early`: the first pieces of the exact key's object, read beside the lookup (tools/early_head.h),
// or null; used when the lookup found that very object and the tail did not hold all of it.
Result<OpenedEntry> open_for_extract(const std::shared_ptr<remote::ObjectStore>& store, const ResolvedEntry& entry,
                                     std::shared_ptr<format::ArchiveHead> early, format::ExtractConfig& config) {
  const remote::ObjectInfo& object = entry.match->object;
  OpenedEntry out;
  if (!entry.tail.empty()) {
    LC_ASSIGN_OR_RETURN(out.source, remote::ObjectByteSource::from_tail(store, object, entry.tail));
    auto reader = format::ArchiveReader::open(out.source);
    if (reader.ok()) {
      // An archive no larger than the lookup's read is all in hand: the pipeline copies its
      // frames from there (no second download); one failing its digest is still read again
      // from the store (format/frame_pipeline.h), as every frame of a larger archive is.
      if (entry.tail.size() == object.size) config.head = std::make_shared<format::ArchiveHead>(entry.tail);
      else if (early && entry.cache_hit()) config.head = std::move(early);
      out.source->release_tail();  // no other thread has the source yet
      out.reader = std::move(reader).value();
      return out;
    }
    if (reader.error().code() != ErrorCode::kCorrupt) return reader.error().with_context("opening " + out.source->describe());
  }
  out.source = std::static_pointer_cast<remote::ObjectByteSource>(open_entry_source(store, object));
  config.head = std::make_shared<format::ArchiveHead>(
      out.source, format::ArchiveHead::plan(out.source->size(), config.max_inflight_bytes, config.concurrency, config.part_size_bytes));
  // The tail in one read of kEntryTailBytes, as an exact key's lookup reads it: the 256 KiB the
  // reader asks for by default left a node_modules-sized index to a second read, one more round
  // trip before the frames past the head's wave could start (the listing path's tail took
  // 330-400 ms after the listing on Swift through the hosted link, the exact path's 20-30 ms).
  auto reader = format::ArchiveReader::open(out.source, kEntryTailBytes);
  if (!reader.ok()) return reader.error().with_context("opening " + out.source->describe());
  out.reader = std::move(reader).value();
  return out;
}

int extract(const ArgParser& args, std::shared_ptr<remote::ObjectStore> store, const ResolvedEntry& entry,
            std::shared_ptr<format::ArchiveHead> early, int threads, RestoreTimeline& timeline) {
  auto start = std::chrono::steady_clock::now();
  format::ExtractConfig config;
  config.threads = threads;
  apply_extract_safety_options(args, config);
  apply_extract_owner_options(args, config);  // as `extract` does: owners too when run as root
  if (Status s = apply_extract_transfer_options(args, config); !s.ok()) return report_error("restore", s);
  if (Status s = apply_extract_writer_option(args, config); !s.ok()) return report_error("restore", s);
  const format::ArchiveHead* early_head = early.get();
  auto opened = open_for_extract(store, entry, std::move(early), config);
  const bool early_used = early_head != nullptr && config.head.get() == early_head;
  if (!opened.ok()) return report_error("restore", opened.error());
  auto [source, reader] = std::move(opened).value();
  timeline.mark("tail");
  const auto& index = reader->index();
  std::vector<std::string> paths;
  for (const auto& p : args.positionals()) paths.push_back(absolute_path(p));
  auto placed = format::place_roots(index, paths);  // the rule mount uses
  if (!placed.ok()) return report_error("restore", placed.error());
  for (const auto& p : *placed) config.targets.push_back(format::ExtractTarget{p.root, p.path});
  Progress progress("restore", false);  // the engine reports from the calling thread
  config.progress = [&](const format::ExtractProgress& p) { progress.update(p.files_done, p.files_total, p.bytes_done, p.bytes_total); };
  auto stats = format::extract_archive(*reader, config);
  progress.finish();
  if (!stats.ok()) return report_error("restore", stats.error().with_context("extracting " + source->describe()));
  timeline.mark("first_data", stats->first_data);
  timeline.mark("last_data", stats->last_data);
  timeline.mark("extract");
  // What the summary needs, then everything of the archive released before the outputs: the
  // timeline's last step shows what that costs (joins, connections, buffers).
  const uint64_t entry_bytes = source->size();
  const size_t requests = source->requests();
  const std::string described = store->describe();
  reader.reset();
  config.head.reset();
  source.reset();
  timeline.mark("released");
  // The outputs only now that the files are in place: a failed restore must never tell the
  // workflow cache-hit=true (steps guarded by it would be skipped over an empty directory).
  const bool json = args.has("json");
  Status printed = print_key_outputs(entry, !json);
  if (!printed.ok()) return report_error("restore", printed);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (args.has("verbose")) std::cerr << "lazycache restore: timeline: " << timeline.text() << "\n";
  if (json) {
    std::cout << RestoreJson{entry.primary_key,         entry.match->key, described,
                             entry.cache_hit(),         "extract",        stats->files,
                             stats->file_bytes,         entry_bytes,      stats->compressed_bytes_read,
                             static_cast<uint64_t>(ms), timeline.json()}
                     .to_json()
              << "\n";
    return kExitOk;
  }
  char rate[64];
  std::snprintf(rate, sizeof rate, "%s in %.0f ms", human_bytes(stats->file_bytes).c_str(), ms);
  std::cout << "restored key " << entry.match->key << (entry.cache_hit() ? "" : " (restore key match)") << " from " << described << ": "
            << stats->files << " files, " << rate << ", " << stats->frames_read << " frames in " << requests << " range requests ("
            << stats->concurrency << " x " << human_bytes(stats->part_size_bytes) << ")"
            << (early_used ? " + " + std::to_string(kEarlyHeadPieces) + " read beside the lookup" : "") << "\n";
  return kExitOk;
}

int run_restore(ArgParser& args) {
  add_restore_options(args);
  int code = 0;
  RestoreTimeline timeline;  // from here: what the user waits for
  if (!args.parse(code)) return code;
  std::string mode = args.has("extract") ? "extract" : args.get("mode");
  if (mode != "auto" && mode != "mount" && mode != "extract") {
    std::cerr << "lazycache restore: --mode must be auto, mount or extract\n";
    return kExitUsage;
  }
  if (args.get("key").empty()) {
    std::cerr << "lazycache restore: --key is required\n";
    return kExitUsage;
  }
  auto threads = args.get_int("threads");
  if (!threads.ok()) return report_error("restore", threads.error());

  if (mode != "extract") {
    std::string why = fuse_unusable_reason();
    // A directory with files: extract over it, as actions/cache does, rather than hide them.
    for (const auto& p : args.positionals()) {
      if (Status empty = require_empty_mountpoint(absolute_path(p)); why.empty() && mode == "auto" && !empty.ok())
        why = absolute_path(p) + " is not empty";
    }
    if (why.empty()) {
      auto options = restore_mount_options(args);
      if (!options.ok()) return report_error("restore", options.error());
      std::cerr << "lazycache restore: mounting (FUSE is usable; --extract to unpack instead)\n";
      int rc = run_mount(*options);
      // 3 with --fail-on-cache-miss: the miss, already reported. Any other failure (a chunk cache
      // that cannot be created, a mount(2) refused late) still leaves extracting, in this process:
      // the mount's daemon has exited, and the step waits for the tree.
      if (rc == kExitOk || mode == "mount" || (rc == kExitNotFound && args.has("fail-on-cache-miss"))) return rc;
      std::cerr << "lazycache restore: mounting failed (exit " << rc << "); extracting instead\n";
    } else if (mode == "mount") {
      return report_error("restore", Status(ErrorCode::kUnsupported, "cannot mount: " + why));
    } else {
      std::cerr << "lazycache restore: extracting (cannot mount: " << why << ")\n";
    }
  }

  auto store = open_store(args);
  if (!store.ok()) return report_error("restore", store.error());
  std::vector<std::string> saved_paths;
  for (const auto& p : args.positionals()) saved_paths.push_back(absolute_path(p));
  // The exact key's first pieces, beside its lookup (tools/early_head.h), when its object's name
  // is known: PATHs given and their version asked for (not --any-paths).
  const KeyOptions key = key_options_from(args);
  std::shared_ptr<format::ArchiveHead> early;
  if (!saved_paths.empty() && !key.any_paths) {
    if (auto name = primary_object_key(args, remote::entry_version(saved_paths)); name.ok()) early = start_early_head(*store, *name);
  }
  // An exact hit's lookup reads the entry's tail, index included (open_for_extract).
  auto entry = resolve_entry(*store, key, saved_paths, EntryUse::kUse, kEntryTailBytes);
  if (!entry.ok()) return report_error("restore", entry.error());
  timeline.mark("lookup");
  // Not that object (a restore key's match, a miss): its pieces failed or are of no use.
  if (early && !(entry->match && entry->cache_hit())) early.reset();
  if (!entry->match) {
    const bool json = args.has("json");
    // Saved for other paths: a miss, as actions/cache's version makes it (never their tree here).
    if (std::string why = other_paths_message(*entry, (*store)->describe()); !why.empty())
      std::cerr << "lazycache restore: " << why << "\n";
    Status printed = print_key_outputs(*entry, !json);  // a miss is a complete answer: cache-hit=false
    if (!printed.ok()) return report_error("restore", printed);
    (json ? std::cerr : std::cout) << "cache miss for key " << entry->primary_key << " in " << (*store)->describe()
                                   << ": nothing restored\n";
    if (json) std::cout << RestoreJson{.primary_key = entry->primary_key, .store = (*store)->describe(), .mode = "none"}.to_json() << "\n";
    return args.has("fail-on-cache-miss") ? kExitNotFound : kExitOk;
  }
  return extract(args, *store, *entry, std::move(early), static_cast<int>(*threads), timeline);
}

const CommandRegistration kRestore{"restore", "restore a cache entry by key: mount it, or extract it",
                                   "--key KEY [--restore-keys PREFIX]... [--scope S] [--store URL] [--extract] [PATH...]", run_restore};

}  // namespace

void add_restore_options(ArgParser& args) {
  add_store_options(args);
  add_key_options(args);
  args.option("mode", "auto|mount|extract", "mount when FUSE is usable, else extract", "auto");
  args.flag("extract", "same as --mode extract");
  args.flag("fail-on-cache-miss", "exit 3 when no entry matches");
  args.flag("json", "print one JSON object (docs/cli.md) instead of the outputs and summary");
  args.flag("verbose", "when extracting, print the timeline (lookup, tail, first and last data, extract) on stderr");
  args.option("threads", "N", "decompression threads when extracting (0: one per CPU)", "0");
  add_extract_writer_option(args);
  add_extract_safety_options(args);
  add_extract_owner_options(args);
}

Result<MountOptions> restore_mount_options(const ArgParser& args) {
  MountOptions o = default_mount_options();
  LC_ASSIGN_OR_RETURN(StoreSettings store, store_settings_from(args));
  // restore has no --upload-budget: the later unmount --save uploads within mount's default.
  store.transfer.memory_budget_bytes = o.store.transfer.memory_budget_bytes;
  o.store = store;
  if (args.has("memory-budget")) {
    LC_ASSIGN_OR_RETURN(o.memory_budget_bytes, parse_mount_memory_budget(args.get("memory-budget")));
  }
  o.key = key_options_from(args);
  for (const auto& p : args.positionals()) o.paths.push_back(absolute_path(p));
  o.json = args.has("json");
  o.fail_on_cache_miss = args.has("fail-on-cache-miss");
  return o;
}
}  // namespace lazycache::cli
