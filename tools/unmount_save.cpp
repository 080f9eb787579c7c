// SPDX-License-Identifier: MIT
#include "tools/unmount_save.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "common/byte_format.h"
#include "common/posix_files.h"
#include "format/archive_writer.h"
#include "remote/cache_keys.h"
#include "remote/upload_sink.h"
#include "tools/detached_remove.h"
#include "tools/incremental_save.h"
#include "tools/mount_holders.h"
#include "tools/mount_state.h"
#include "tools/progress.h"
#include "tools/save_record.h"
#include "tools/store_entries.h"
#include "tools/store_options.h"

namespace lazycache::cli {
namespace {

// The access list the daemon keeps current while it serves (cmd_mount.cpp), else the final one.
// A refresh first makes the daemon write it as of now (mount_daemon.cpp), so reads of the job's
// last second are not missing.
std::vector<std::string> hot_paths_of(pid_t pid, const std::string& mountpoint) {
  std::vector<std::string> out;
  if (pid <= 0) return out;
  if (auto d = find_daemon(mountpoint); d && d->pid == pid) (void)refresh(*d);
  const std::string base = run_dir() + "/mount-" + std::to_string(pid);
  auto text = read_whole_file(base + ".access.live", 64 << 20);
  if (!text.ok()) text = read_whole_file(base + ".access", 64 << 20);
  if (!text.ok()) return out;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

bool upper_changed(const SaveRecord& r) {
  if (r.pid == 0) return true;            // a miss: the plain directory is what the job made
  if (r.state_dir.empty()) return false;  // --read-only: nothing can have changed
  return !list_dir(r.state_dir + "/upper").empty();
}

struct Group {
  std::vector<SaveRecord> records;
};

// The version the group's entry is named for: what mount recorded (the mount points in mount
// order), else (a record from before versions) the paths of the group in the order given.
std::string save_version(const std::vector<SaveRecord>& records) {
  if (!records.front().version.empty()) return records.front().version;
  std::vector<std::string> paths;
  for (const SaveRecord& r : records) paths.push_back(r.path);
  return remote::entry_version(paths);
}

struct SaveOutcome {
  bool skipped_existing = false;
  format::PackStats stats;
  std::optional<IncrementalSaveCounts> incremental;  // set when the incremental path saved
  std::string plan;                                  // reuse, relayout or full pack, and why (tools/save_chooser.h); empty: no choice made
  size_t hot = 0;
};

Status save_group(const Group& g, SaveOutcome* out) {
  const SaveRecord& first = g.records.front();
  // The record holds the store settings mount parsed (typed: nothing is parsed again here).
  const remote::TransferConfig& transfer = first.store.transfer;
  LC_RETURN_IF_ERROR(check_upload_part_size(transfer));
  LC_ASSIGN_OR_RETURN(auto store, open_store(first.store));
  LC_ASSIGN_OR_RETURN(std::string object_key, remote::entry_object_key(first.scope, first.primary_key, save_version(g.records)));
  // An existing entry is not saved again. The incremental path finds out as it starts its
  // upload (create-only: kAlreadyExists), so only the other paths ask first.
  auto exists = [&]() -> Result<bool> {
    auto existing = store->head(object_key);
    if (existing.ok()) return true;
    if (existing.error().code() != ErrorCode::kNotFound) return existing.error();
    return false;
  };
  if (first.pid <= 0) {
    LC_ASSIGN_OR_RETURN(bool found, exists());
    if (found) {
      out->skipped_existing = true;
      return Status();
    }
  }

  // Each path named as the entry mounted there names it.
  const std::vector<format::PackRoot> roots = save_roots(g.records);
  format::PackConfig pack;
  pack.tool_version = std::string("lazycache ") + LC_VERSION;
  Progress progress("unmount --save", false);  // lines every few seconds in a CI log (tools/progress.h)
  pack.progress = [&progress](const format::PackProgress& p) {
    progress.update(p.files_done, p.files_total, p.bytes_in, p.bytes_in_total, "uploaded " + human_bytes(p.bytes_out));
  };
  for (const SaveRecord& r : g.records) {
    pack.xattrs = std::max(pack.xattrs, r.xattrs);  // the entry was packed with one choice for all paths
    // The access list names files as the mounted entry does; mounted elsewhere (--any-paths),
    // the new entry names them by this path (until session 41 such a learned layout was lost:
    // no name resolved, and the save still said "N hot files first").
    for (const auto& p : hot_paths_of(r.pid, r.path)) {
      if (auto saved = saved_path_of(r, p)) pack.hot_paths.push_back(std::move(*saved));
    }
  }
  out->hot = pack.hot_paths.size();
  remote::PutOptions put;
  put.create_only = true;
  put.concurrency = transfer.concurrency;
  put.part_size_bytes = transfer.part_size_bytes;

  // After a save, the local store's size bound as after `save` (tools/store_entries.h); the base
  // entry is still mounted here, so it is kept.
  auto bound = [&] {
    if (Status s = bound_local_store(store_url_of(first.store), *store, object_key, std::cerr); !s.ok())
      std::cerr << "lazycache unmount: warning: " << s.to_string() << "\n";
  };
  // Mounted from an entry: build on it, compressing only what changed. Anything that stops it
  // falls back to packing the whole merged view (the upload of the attempt is aborted unpublished).
  if (first.pid > 0) {
    auto inc = save_incremental(g.records, store, object_key, put, pack);
    if (inc.ok()) {
      out->stats = inc->stats.pack;
      out->incremental = *inc;
      out->plan = inc->plan;
      bound();
      return Status();
    }
    if (inc.error().code() == ErrorCode::kAlreadyExists) {
      out->skipped_existing = true;
      return Status();
    }
    if (inc.error().code() == ErrorCode::kInternal && save_crosscheck_enabled()) return inc.error();
    if (inc.error().code() == ErrorCode::kCancelled) {
      out->plan = inc.error().message();  // the chooser's: a full pack costs less
    } else {
      std::cerr << "lazycache unmount: incremental save not possible (" << inc.error().to_string() << "); packing the whole merged view\n";
    }
    LC_ASSIGN_OR_RETURN(bool found, exists());
    if (found) {
      out->skipped_existing = true;
      return Status();
    }
  }
  remote::UploadSink sink(store, object_key, put);
  auto written = format::write_archive(roots, sink, pack);
  if (!written.ok()) {
    if (written.error().code() == ErrorCode::kAlreadyExists) {
      out->skipped_existing = true;
      return Status();
    }
    return written.error().with_context("saving key " + first.primary_key + " to " + store->describe());
  }
  out->stats = *written;
  bound();
  return Status();
}

// "…, 12 frames reused / 2 compressed (316.0 KiB compressed; base frames: 10 from the chunk
// cache, 2 from the store)" -- the figures that say whether the save was incremental. Sizes in
// the one byte format (common/byte_format.h), which bench/scenarios.sh and the tests parse.
std::string incremental_summary(const IncrementalSaveCounts& c) {
  // A store that turned the copies down had those frames read back from it instead.
  const bool refused = !c.no_store_copy.empty();
  char line[512];
  std::snprintf(line, sizeof line,
                "%u frames reused / %u compressed (%s compressed, %llu changed paths; base frames: %u copied by the store, %u from the "
                "chunk cache, %u from the store)",
                c.stats.frames_reused, c.stats.frames_compressed, human_bytes(c.stats.bytes_compressed).c_str(),
                static_cast<unsigned long long>(c.changed_paths), refused ? 0u : c.stats.frames_copied, c.frames_from_cache,
                c.frames_from_store + (refused ? c.stats.frames_copied : 0u));
  std::string out = line;
  const format::IncrementalPhases& p = c.stats.phases;
  std::snprintf(line, sizeof line, " (times: base %.0f ms, tree %.0f ms, plan %.0f ms, frames %.0f ms, index %.0f ms, commit %.0f ms)",
                c.base_s * 1000, p.tree_s * 1000, p.plan_s * 1000, p.frames_s * 1000, p.index_s * 1000, p.commit_s * 1000);
  out += line;
  if (refused) {
    out += "; the store cannot copy (" + c.no_store_copy + "): reused frames went through this machine";
  } else {
    out += "; uploaded " + human_bytes(c.store_copy.bytes_sent) + " (" + human_bytes(c.store_copy.bytes_read_back) +
           " of it read back from the base), " + human_bytes(c.store_copy.bytes_copied) + " copied in the store";
  }
  return out;
}

// Before a save: a busy path cannot be unmounted after it, so nothing is saved or changed.
// True (after printing the holders and what to do) when a path of the group is busy.
bool report_busy(const Group& g) {
  bool busy = false;
  for (const SaveRecord& r : g.records) {
    if (r.pid <= 0) continue;  // a miss: a plain directory, nothing to unmount
    auto holders = find_mount_holders(r.path);
    // The daemon's own tree walk (fs/tree_warmer.h) is no user of the mount: the unmount after
    // the save ends it.
    std::erase_if(holders, [&r](const MountHolder& h) { return is_daemon_or_its_walk(h, r.pid); });
    if (holders.empty()) continue;
    busy = true;
    std::cerr << "lazycache unmount: " << r.path << " is busy (" << describe_holders(holders) << "); nothing was saved and it "
              << "stays mounted as it was; " << busy_advice(r.path) << "\n";
  }
  if (busy && g.records.size() > 1) {
    std::cerr << "lazycache unmount: the paths mounted with it are saved together, so they were not saved either\n";
  }
  return busy;
}

}  // namespace

UnmountSaveResult save_before_unmount(const std::vector<std::string>& paths, bool check_busy) {
  UnmountSaveResult result;
  std::map<std::string, Group> groups;
  for (const std::string& path : paths) {
    auto rec = read_save_record(path);
    if (!rec.ok()) {
      std::cerr << "lazycache unmount: cannot save " << path << ": " << rec.error().message()
                << "; it stays mounted (save it with `lazycache save --key KEY " << path << "`, then unmount without --save)\n";
      result.exit_code = 1;
      result.keep_mounted.push_back(path);
      continue;
    }
    // One entry per mount: paths mounted separately under one key are saved for their own paths.
    std::string id = rec->primary_key + "\n" + rec->scope + "\n" + rec->version;
    id += "\n" + store_settings_text(rec->store);
    groups[id].records.push_back(std::move(rec).value());
  }
  for (auto& [id, g] : groups) {
    const SaveRecord& first = g.records.front();
    std::string where;
    for (const auto& r : g.records) where += (where.empty() ? "" : ", ") + r.path;
    bool changed = false, exact = true;
    for (const auto& r : g.records) {
      changed = changed || upper_changed(r);
      exact = exact && r.exact_hit;
    }
    if (check_busy && report_busy(g)) {
      for (const auto& r : g.records) result.keep_mounted.push_back(r.path);
      result.exit_code = 1;
      continue;
    }
    if (exact && !changed) {
      std::cout << "cache hit on key " << first.primary_key << " and nothing changed under " << where << ": not saving\n";
      for (const auto& r : g.records) result.done.push_back(r.path);
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    SaveOutcome outcome;
    Status s = save_group(g, &outcome);
    const format::PackStats& stats = outcome.stats;
    if (!s.ok()) {
      std::cerr << "lazycache unmount: " << s.to_string() << "\n";
      for (const auto& r : g.records) {
        std::cerr << "lazycache unmount: " << r.path << " stays mounted";
        if (!r.state_dir.empty()) std::cerr << "; its changes are kept in " << r.state_dir << "/upper";
        std::cerr << "\n";
        result.keep_mounted.push_back(r.path);
      }
      result.exit_code = 1;
      continue;
    }
    if (outcome.skipped_existing) {
      std::cout << "cache entry for key " << first.primary_key << " already exists; not saving " << where << " (entries are immutable)\n";
    } else {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      char line[256];
      std::snprintf(line, sizeof line, "%llu files, %s -> %s in %u frames, %.0f ms, %zu hot files first",
                    static_cast<unsigned long long>(stats.files), human_bytes(stats.file_bytes).c_str(),
                    human_bytes(stats.archive_bytes).c_str(), stats.frames, seconds * 1000, outcome.hot);
      std::cout << "saved " << where << " as key " << first.primary_key << ": " << line;
      if (outcome.incremental) std::cout << ", " << incremental_summary(*outcome.incremental);
      if (!outcome.plan.empty()) std::cout << "; plan: " << outcome.plan;
      std::cout << "\n";
    }
    for (const auto& r : g.records) result.done.push_back(r.path);
  }
  return result;
}

void clean_after_save(const std::vector<std::string>& done) {
  for (const std::string& path : done) {
    auto rec = read_save_record(path);
    if (!rec.ok()) continue;
    // In the background: the save is reported and the mount gone; nothing waits for this.
    if (!rec->state_dir.empty() && !remove_tree_detached(rec->state_dir)) {
      std::cerr << "lazycache unmount: could not remove " << rec->state_dir << ": " << std::strerror(errno) << "\n";
    }
    ::unlink(save_record_path(path).c_str());
    if (rec->pid > 0) ::unlink((run_dir() + "/mount-" + std::to_string(rec->pid) + ".access.live").c_str());
  }
}

}  // namespace lazycache::cli
