// SPDX-License-Identifier: MIT
// `lazycache lookup --key K [--restore-keys P]... [PATH...]`: which entry a restore of the PATHs
// would use, without downloading anything (a HEAD, then list requests per prefix; the PATHs give
// the entry's version, as for restore). Prints the actions/cache
// outputs (and appends them to $GITHUB_OUTPUT) and the entry's size and age.
#include <ctime>
#include <iostream>

#include "tools/command.h"
#include "tools/mount_state.h"
#include "tools/store_options.h"

namespace lazycache::cli {
namespace {

int run_lookup(ArgParser& args) {
  add_store_options(args, StoreUse::kRead);
  add_key_options(args);
  args.flag("fail-on-cache-miss", "exit 3 when no entry matches");
  int code = 0;
  if (!args.parse(code)) return code;
  if (args.get("key").empty()) {
    std::cerr << "lazycache lookup: --key is required\n";
    return kExitUsage;
  }
  auto store = open_store(args);
  if (!store.ok()) return report_error("lookup", store.error());
  std::vector<std::string> saved_paths;
  for (const auto& p : args.positionals()) saved_paths.push_back(absolute_path(p));
  auto entry = resolve_entry(*store, args, saved_paths, EntryUse::kLookOnly);
  if (!entry.ok()) return report_error("lookup", entry.error());
  Status printed = print_key_outputs(*entry);
  if (!printed.ok()) return report_error("lookup", printed);
  if (!entry->match) {
    if (std::string why = other_paths_message(*entry, (*store)->describe()); !why.empty()) {
      std::cerr << "lazycache lookup: " << why << "\n";
      return args.has("fail-on-cache-miss") ? kExitNotFound : kExitOk;
    }
    std::cerr << "lazycache lookup: no entry for key " << entry->primary_key << " in " << (*store)->describe() << "\n";
    return args.has("fail-on-cache-miss") ? kExitNotFound : kExitOk;
  }
  const auto& obj = entry->match->object;
  int64_t age = static_cast<int64_t>(std::time(nullptr)) - obj.last_modified_s;
  std::cerr << "lazycache lookup: " << (entry->cache_hit() ? "exact hit" : "restore-key match") << ": " << (*store)->describe() << "/"
            << obj.key << ", " << obj.size << " bytes, saved " << (age < 0 ? 0 : age) << " s ago\n";
  return kExitOk;
}

const CommandRegistration kLookup{"lookup", "find the entry a restore would use (no download)",
                                  "--key KEY [--restore-keys PREFIX]... [--scope S] [--store URL] [--any-paths] [PATH...]", run_lookup};

}  // namespace
}  // namespace lazycache::cli
