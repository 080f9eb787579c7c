// SPDX-License-Identifier: MIT
// File: tools/store_entries.h -- the entries of a store as `list`, `delete`, `prune` and the local
// store's size bound see them, and the pure policy that picks what a prune removes.
//
// An entry is an object named as remote/cache_keys.h names entries, in any scope. Its "last
// used" time is when it was last restored or mounted (ObjectStore::record_access: the local
// store keeps it as the file's access time) or, where the store keeps no such time (S3), when it
// was saved. An entry that a live mount serves (a daemon in run_dir() whose state names the store
// and the object) is "in use": nothing here ever removes it.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "remote/object_store.h"
#include "tools/command.h"

namespace lazycache::cli {

struct StoreEntry {
  std::string scope, key;
  remote::ObjectInfo object;
  int64_t last_used_s = 0;  // max(object.last_access_s, object.last_modified_s)
  std::string in_use_by;    // a mount point serving this entry; empty when no live mount does
  std::string version;      // of the saved paths (remote::entry_version); "" for an older lazycache's entry
};

// Every entry of the store (every page), sorted by scope, key, then object name (a key saved for
// several path sets has one entry per version); `scope` nullopt: all scopes.
// Only keys starting with key_prefix. Errors: the store's, with what was being listed.
Result<std::vector<StoreEntry>> list_store_entries(remote::ObjectStore& store, const std::optional<std::string>& scope,
                                                   std::string_view key_prefix);
// Fills in_use_by from the live mount daemons' state files (tools/mount_state.h).
void mark_entries_in_use(std::vector<StoreEntry>& entries, const std::string& store_description);

struct PrunePolicy {
  std::optional<int64_t> older_than_s;  // remove entries last used longer ago than this
  std::optional<uint64_t> keep_bytes;   // then remove least recently used ones until the rest fit
  std::string protect_object;           // never this one (the entry a save just wrote)
};
// Pure: the indexes of `entries` to remove under `policy` at time now_s, least recently used
// first (ties: older save, then key). In-use and protected entries are never chosen; they still
// count towards keep_bytes (they take the space).
std::vector<size_t> plan_prune(const std::vector<StoreEntry>& entries, const PrunePolicy& policy, int64_t now_s);

// "90s", "30m", "12h", "7d", "2w" or plain seconds. kInvalidArgument naming `what` otherwise.
Result<int64_t> parse_duration(std::string_view text, std::string_view what);

// The local store's size bound: $LAZYCACHE_STORE_MAX_SIZE (a size; 0 = unbounded), default
// kDefaultLocalStoreMaxBytes, like GitHub's 10 GB per repository.
inline constexpr uint64_t kDefaultLocalStoreMaxBytes = 10ull << 30;
Result<uint64_t> local_store_max_bytes();
// After a save to a local directory store (`store_url`, as store_url_of() names it): removes
// least recently used entries until the store fits its bound, never `saved_object` nor an entry
// in use; says on `log` what it removed. Does nothing for other stores.
Status bound_local_store(const std::string& store_url, remote::ObjectStore& store, std::string_view saved_object, std::ostream& log);

// "3 min", "5 h", "2 d": an age for listings.
std::string age_text(int64_t seconds);

}  // namespace lazycache::cli
