// SPDX-License-Identifier: MIT
// `lazycache delete [--scope S] KEY...`: removes entries (like `gh cache delete`): every entry of
// each KEY, whatever paths it was saved for. An entry a live mount serves is refused: its daemon
// still reads it.
#include <iostream>

#include "remote/cache_keys.h"
#include "tools/command.h"
#include "tools/progress.h"
#include "tools/store_entries.h"
#include "tools/store_options.h"

namespace lazycache::cli {
namespace {

int run_delete(ArgParser& args) {
  add_store_options(args, StoreUse::kRead);
  args.option("scope", "SCOPE", "the scope of the keys", "");
  int code = 0;
  if (!args.parse(code)) return code;
  if (args.positionals().empty()) {
    std::cerr << "lazycache delete: usage: lazycache delete [--scope S] KEY...\n";
    return kExitUsage;
  }
  auto store = open_store(args);
  if (!store.ok()) return report_error("delete", store.error());
  const std::string scope = args.get("scope");
  int result = kExitOk;
  for (const std::string& key : args.positionals()) {
    if (auto valid = remote::entry_object_key(scope, key, ""); !valid.ok()) return report_error("delete", valid.error());
    // Every entry of the key: one per set of paths it was saved for (remote/cache_keys.h).
    auto listed = list_store_entries(**store, scope, key);
    if (!listed.ok()) {
      report_error("delete", listed.error().with_context("looking up key " + key));
      result = kExitFailure;
      continue;
    }
    std::vector<StoreEntry> entries;
    for (StoreEntry& e : *listed)
      if (e.scope == scope && e.key == key) entries.push_back(std::move(e));
    if (entries.empty()) {
      std::cerr << "lazycache delete: no entry for key " << key << " in " << (*store)->describe() << "\n";
      if (result == kExitOk) result = kExitNotFound;
      continue;
    }
    mark_entries_in_use(entries, (*store)->describe());
    for (const StoreEntry& e : entries) {
      if (!e.in_use_by.empty()) {
        std::cerr << "lazycache delete: key " << key << " is mounted at " << e.in_use_by << ": not deleting it (unmount it first)\n";
        result = kExitFailure;
        continue;
      }
      if (Status s = (*store)->remove(e.object.key); !s.ok()) {
        report_error("delete", s.with_context("deleting key " + key));
        result = kExitFailure;
        continue;
      }
      std::cout << "deleted key " << key << (entries.size() > 1 ? " (" + e.object.key + ")" : "") << " (" << human_bytes(e.object.size)
                << ") from " << (*store)->describe() << "\n";
    }
  }
  return result;
}

const CommandRegistration kDelete{"delete", "delete entries of a store by key", "[--scope S] [--store URL] KEY...", run_delete};

}  // namespace
}  // namespace lazycache::cli
