// SPDX-License-Identifier: MIT
// `lazycache delete [--scope S] KEY...`: removes entries (like `gh cache delete`). An entry a
// live mount serves is refused: its daemon still reads it.
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
    auto object = remote::entry_object_key(scope, key);
    if (!object.ok()) return report_error("delete", object.error());
    auto info = (*store)->head(*object);
    if (!info.ok() && info.error().code() != ErrorCode::kNotFound) {
      report_error("delete", info.error().with_context("looking up key " + key));
      result = kExitFailure;
      continue;
    }
    if (!info.ok()) {
      std::cerr << "lazycache delete: no entry for key " << key << " in " << (*store)->describe() << "\n";
      if (result == kExitOk) result = kExitNotFound;
      continue;
    }
    std::vector<StoreEntry> one{StoreEntry{scope, key, *info}};
    mark_entries_in_use(one, (*store)->describe());
    const StoreEntry* found = &one.front();
    if (!found->in_use_by.empty()) {
      std::cerr << "lazycache delete: key " << key << " is mounted at " << found->in_use_by << ": not deleting it (unmount it first)\n";
      result = kExitFailure;
      continue;
    }
    if (Status s = (*store)->remove(*object); !s.ok()) {
      report_error("delete", s.with_context("deleting key " + key));
      result = kExitFailure;
      continue;
    }
    std::cout << "deleted key " << key << " (" << human_bytes(found->object.size) << ") from " << (*store)->describe() << "\n";
  }
  return result;
}

const CommandRegistration kDelete{"delete", "delete entries of a store by key", "[--scope S] [--store URL] KEY...", run_delete};

}  // namespace
}  // namespace lazycache::cli
