// SPDX-License-Identifier: MIT
#include "tools/store_entries.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>

#include "remote/cache_keys.h"
#include "remote/store_url.h"
#include "tools/mount_state.h"
#include "tools/progress.h"
#include "tools/store_options.h"

namespace lazycache::cli {

Result<std::vector<StoreEntry>> list_store_entries(remote::ObjectStore& store, const std::optional<std::string>& scope,
                                                   std::string_view key_prefix) {
  // With a scope, one listing of its prefix; across scopes, everything (a scope is a prefix
  // segment, so a key prefix alone does not narrow the listing).
  const std::string list_prefix = scope ? remote::entry_list_prefix(*scope, key_prefix) : "";
  std::vector<StoreEntry> out;
  std::string continuation;
  do {
    auto page = store.list(list_prefix, continuation);
    if (!page.ok()) return page.error().with_context("listing the entries of " + store.describe());
    for (const auto& obj : page->objects) {
      auto name = remote::entry_name_of(obj.key);
      if (!name || (scope && name->scope != *scope) || name->key.compare(0, key_prefix.size(), key_prefix) != 0) continue;
      out.push_back(StoreEntry{name->scope, name->key, obj, std::max(obj.last_access_s, obj.last_modified_s), "", name->version});
    }
    continuation = page->next_continuation;
  } while (!continuation.empty());
  std::sort(out.begin(), out.end(), [](const StoreEntry& a, const StoreEntry& b) {
    if (a.scope != b.scope) return a.scope < b.scope;
    return a.key != b.key ? a.key < b.key : a.object.key < b.object.key;
  });
  return out;
}

void mark_entries_in_use(std::vector<StoreEntry>& entries, const std::string& store_description) {
  for (const DaemonState& d : list_daemons()) {
    if (d.stopped || d.mountpoints.empty() || !daemon_alive(d)) continue;
    // mount records "STORE OBJECT" (tools/cmd_mount.cpp) for an entry it serves.
    for (StoreEntry& e : entries)
      if (d.archive == store_description + " " + e.object.key) e.in_use_by = d.mountpoints.front();
  }
}

std::vector<size_t> plan_prune(const std::vector<StoreEntry>& entries, const PrunePolicy& policy, int64_t now_s) {
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const StoreEntry &x = entries[a], &y = entries[b];
    if (x.last_used_s != y.last_used_s) return x.last_used_s < y.last_used_s;
    if (x.object.last_modified_s != y.object.last_modified_s) return x.object.last_modified_s < y.object.last_modified_s;
    return x.object.key < y.object.key;
  });
  uint64_t total = 0;
  for (const auto& e : entries) total += e.object.size;
  std::vector<size_t> chosen;
  for (size_t i : order) {
    const StoreEntry& e = entries[i];
    if (!e.in_use_by.empty() || (!policy.protect_object.empty() && e.object.key == policy.protect_object)) continue;
    const bool too_old = policy.older_than_s && now_s - e.last_used_s > *policy.older_than_s;
    const bool too_big = policy.keep_bytes && total > *policy.keep_bytes;
    if (!too_old && !too_big) continue;
    chosen.push_back(i);
    total -= e.object.size;
  }
  return chosen;
}

Result<int64_t> parse_duration(std::string_view text, std::string_view what) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view unit = text.substr(digits);
  int64_t mult = 0;
  if (unit.empty() || unit == "s") mult = 1;
  else if (unit == "m") mult = 60;
  else if (unit == "h") mult = 3600;
  else if (unit == "d") mult = 86400;
  else if (unit == "w") mult = 7 * 86400;
  if (digits == 0 || digits > 9 || mult == 0)
    return Status(ErrorCode::kInvalidArgument,
                  std::string(what) + ": expected a duration like 7d, 12h, 30m or 90s, got '" + std::string(text) + "'");
  return std::stoll(std::string(text.substr(0, digits))) * mult;
}

Result<uint64_t> local_store_max_bytes() {
  const char* env = std::getenv("LAZYCACHE_STORE_MAX_SIZE");
  if (!env || !*env) return kDefaultLocalStoreMaxBytes;
  return parse_size_text(env, "LAZYCACHE_STORE_MAX_SIZE");
}

Status bound_local_store(const std::string& store_url, remote::ObjectStore& store, std::string_view saved_object, std::ostream& log) {
  auto url = remote::parse_store_url(store_url);
  if (!url.ok() || url->kind != remote::StoreUrl::Kind::kLocalDir) return Status();
  LC_ASSIGN_OR_RETURN(uint64_t max_bytes, local_store_max_bytes());
  if (max_bytes == 0) return Status();
  LC_ASSIGN_OR_RETURN(auto entries, list_store_entries(store, std::nullopt, ""));
  mark_entries_in_use(entries, store.describe());
  PrunePolicy policy;
  policy.keep_bytes = max_bytes;
  policy.protect_object = std::string(saved_object);
  for (size_t i : plan_prune(entries, policy, static_cast<int64_t>(std::time(nullptr)))) {
    const StoreEntry& e = entries[i];
    LC_RETURN_IF_ERROR(store.remove(e.object.key).with_context("evicting " + e.object.key));
    log << "lazycache: store " << store.describe() << " over its bound of " << human_bytes(max_bytes)
        << " (LAZYCACHE_STORE_MAX_SIZE): evicted key " << e.key << (e.scope.empty() ? "" : " in scope " + e.scope) << " ("
        << human_bytes(e.object.size) << ", last used " << age_text(static_cast<int64_t>(std::time(nullptr)) - e.last_used_s) << " ago)\n";
  }
  return Status();
}

std::string age_text(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 120) return std::to_string(seconds) + " s";
  if (seconds < 2 * 3600) return std::to_string(seconds / 60) + " min";
  if (seconds < 2 * 86400) return std::to_string(seconds / 3600) + " h";
  return std::to_string(seconds / 86400) + " d";
}

}  // namespace lazycache::cli
