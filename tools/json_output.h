// SPDX-License-Identifier: MIT
// File: tools/json_output.h -- the objects that `--json` prints, each defined once here (and
// documented field by field in docs/cli.md, "JSON output"). Every --json output is JSON Lines:
// one object per line on stdout, nothing else on stdout; messages stay on stderr.
//
//   save      SaveJson     one object per save
//   restore   RestoreJson  one object (extract or miss; a mount prints mount's)
//   mount     RestoreJson  one object, once every mount serves ("mode":"mount")
//   unmount   {"path","stats":MountStats}   one per path (fs/mount_stats.h, MountStats::to_json)
//   status    {"path","state","pid","stats"} one per path
//   list      StoreEntryJson one per entry
//   doctor, cache: one object (their own fields, docs/cli.md)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lazycache::cli {

// A flat JSON object built field by field; strings are escaped (json_escape).
class JsonObject {
 public:
  JsonObject& add(std::string_view key, std::string_view value);
  JsonObject& add(std::string_view key, const char* value) { return add(key, std::string_view(value)); }
  JsonObject& add(std::string_view key, uint64_t value);
  JsonObject& add(std::string_view key, bool value);
  JsonObject& add_raw(std::string_view key, std::string_view json);  // an already-encoded value
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(std::string_view k);
  std::string body_;
};

// `save --json`.
struct SaveJson {
  std::string key, store, object;
  bool saved = false;  // false: the entry existed (skipped; entries are immutable)
  uint64_t files = 0, file_bytes = 0;
  uint64_t archive_bytes = 0;  // the entry's size = bytes uploaded
  uint64_t frames = 0, ms = 0, requests = 0, retries = 0;
  std::string to_json() const;
};

// `restore --json` and `mount --json`.
struct RestoreJson {
  std::string primary_key, matched_key, store;
  bool cache_hit = false;  // exact match of the primary key
  std::string mode;        // "extract", "mount" or "none" (a miss)
  uint64_t files = 0, file_bytes = 0;
  uint64_t entry_bytes = 0;    // the archive's size in the store
  uint64_t bytes_fetched = 0;  // read from the store so far (extract: all of it; mount: at mount)
  uint64_t ms = 0;
  std::string timeline;  // extract: RestoreTimeline::json() (tools/restore_timeline.h); "" leaves it out
  std::string to_json() const;
  // "exact", "partial" (a restore-keys match) or "miss".
  std::string hit() const { return matched_key.empty() ? "miss" : cache_hit ? "exact" : "partial"; }
};

// `list --json`: one per entry. Times are seconds since the epoch.
struct StoreEntryJson {
  std::string scope, key, object;
  uint64_t bytes = 0;
  int64_t saved_s = 0, last_used_s = 0;
  std::string mounted_at;  // a mount point serving the entry; "" when none
  std::string version;     // of the paths it was saved for (remote::entry_version); "" before versions
  std::string to_json() const;
};

}  // namespace lazycache::cli
