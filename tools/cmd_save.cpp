// SPDX-License-Identifier: MIT
// `lazycache save --key K PATH...`: pack PATHs and upload the archive as the entry of key K,
// streaming (the archive writer's output feeds a multipart upload through UploadSink: compression
// and upload overlap, memory stays near the pipe plus (concurrency + 1) parts, no temp file).
// Entries are immutable: an existing key is skipped with a message (exit 0).
#include <chrono>
#include <cstdio>
#include <iostream>

#include "format/archive_writer.h"
#include "remote/cache_keys.h"
#include "remote/upload_sink.h"
#include "tools/command.h"
#include "tools/json_output.h"
#include "tools/mount_state.h"
#include "tools/progress.h"
#include "tools/save_options.h"
#include "tools/store_entries.h"
#include "tools/store_options.h"
#include "tools/trace_state.h"

namespace lazycache::cli {
namespace {

int skipped(const std::string& key, const std::string& where, bool json) {
  (json ? std::cerr : std::cout) << "cache entry for key " << key << " already exists in " << where
                                 << "; not saving (entries are immutable)\n";
  if (json) std::cout << SaveJson{.key = key, .store = where}.to_json() << "\n";
  return kExitOk;
}

int run_save(ArgParser& args) {
  add_save_options(args);
  int code = 0;
  if (!args.parse(code)) return code;
  if (args.get("key").empty() || args.positionals().empty()) {
    std::cerr << "lazycache save: usage: lazycache save --key KEY [options] PATH...\n";
    return kExitUsage;
  }
  // Parsed once: everything below reads the typed options.
  auto parsed = parse_save_options(args);
  if (!parsed.ok()) return report_error("save", parsed.error());
  const SaveOptions& opts = *parsed;
  const bool json = opts.json;
  if (auto bound = local_store_max_bytes(); !bound.ok()) return report_error("save", bound.error());

  std::vector<format::PackRoot> roots;
  for (const auto& p : opts.paths) roots.push_back(format::PackRoot{p});
  format::PackConfig pack;
  // A traced job (a cache miss): what it read goes first, as after a mount (tools/trace_state.h).
  std::vector<TraceInfo> traces;
  if (!opts.no_trace) pack.hot_paths = hot_list_from_traces("save", opts.paths, &traces);
  auto forget_traces = [&traces] {  // once the entry exists; a failed save keeps them for a retry
    for (const TraceInfo& t : traces) remove_trace_files(t);
  };

  auto store = open_store(opts.store);
  if (!store.ok()) return report_error("save", store.error());
  // The paths, in order, are part of the entry's identity (remote::entry_version), as in actions/cache.
  auto object_key = remote::entry_object_key(opts.scope, opts.key, remote::entry_version(opts.paths));
  if (!object_key.ok()) return report_error("save", object_key.error());
  const std::string& key = opts.key;
  const std::string where = (*store)->describe();

  // Cheap check before packing anything; the create-only publish below closes the race.
  auto existing = (*store)->head(*object_key);
  if (existing.ok()) {
    forget_traces();
    return skipped(key, where, json);
  }
  if (existing.error().code() != ErrorCode::kNotFound) return report_error("save", existing.error());

  pack.level = opts.level;
  pack.frame_size_bytes = opts.frame_size_bytes;
  pack.threads = opts.threads;
  pack.xattrs = opts.xattrs;
  pack.tool_version = std::string("lazycache ") + LC_VERSION;
  const bool quiet = opts.quiet;
  Progress progress("save", quiet);
  pack.progress = [&](const format::PackProgress& p) {
    progress.update(p.files_done, p.files_total, p.bytes_in, p.bytes_in_total, "uploaded " + human_bytes(p.bytes_out));
  };

  remote::PutOptions put;
  put.create_only = true;
  put.concurrency = opts.store.transfer.concurrency;
  put.part_size_bytes = opts.store.transfer.part_size_bytes;
  auto start = std::chrono::steady_clock::now();
  remote::UploadSink sink(*store, *object_key, put);
  auto stats = format::write_archive(roots, sink, pack);
  progress.finish();
  if (stats.ok() || stats.error().code() == ErrorCode::kAlreadyExists) forget_traces();
  if (!stats.ok()) {
    if (stats.error().code() == ErrorCode::kAlreadyExists) return skipped(key, where, json);
    return report_error("save", stats.error().with_context("saving key " + key + " to " + where));
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The local store's size bound (LAZYCACHE_STORE_MAX_SIZE): a self-hosted runner's disk must
  // not fill. The entry is saved whatever happens here; a failed eviction is only a warning.
  if (Status s = bound_local_store(store_url_of(opts.store), **store, *object_key, std::cerr); !s.ok())
    std::cerr << "lazycache save: warning: " << s.to_string() << "\n";
  if (json) {
    const auto t = (*store)->transfer_stats();
    std::cout << SaveJson{key,
                          where,
                          *object_key,
                          true,
                          stats->files,
                          stats->file_bytes,
                          stats->archive_bytes,
                          stats->frames,
                          static_cast<uint64_t>(seconds * 1000),
                          t.requests,
                          t.retries}
                     .to_json()
              << "\n";
    return kExitOk;
  }
  if (quiet) return kExitOk;
  std::cout << "saved key " << key << " to " << where << "/" << *object_key << ": " << stats->files
            << (stats->files == 1 ? " file, " : " files, ") << human_bytes(stats->file_bytes) << " -> " << human_bytes(stats->archive_bytes)
            << " in " << stats->frames << " frames, " << static_cast<int>(seconds * 1000) << " ms";
  if (seconds > 0) std::cout << " (" << human_bytes(static_cast<uint64_t>(static_cast<double>(stats->archive_bytes) / seconds)) << "/s)";
  if (auto t = (*store)->transfer_stats(); t.requests > 0)
    std::cout << "; " << t.requests << " requests, up to " << t.max_in_flight << " at once, " << t.retries << " retries";
  if (!traces.empty()) std::cout << "; " << pack.hot_paths.size() << " traced files first";
  std::cout << "\n";
  return kExitOk;
}

const CommandRegistration kSave{"save", "pack paths and upload them as the entry of a cache key",
                                "--key KEY [--scope S] [--store URL] [options] PATH...", run_save};

}  // namespace
}  // namespace lazycache::cli
