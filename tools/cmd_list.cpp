// SPDX-License-Identifier: MIT
// `lazycache list [--scope S] [--prefix P] [--json]`: the entries of a store (like `gh cache
// list`): key, scope, size, when saved, when last used, and the mount serving it if any.
#include <ctime>
#include <iostream>

#include "tools/command.h"
#include "tools/json_output.h"
#include "tools/progress.h"
#include "tools/store_entries.h"
#include "tools/store_options.h"

namespace lazycache::cli {
namespace {

int run_list(ArgParser& args) {
  add_store_options(args, StoreUse::kRead);
  args.option("scope", "SCOPE", "only this scope's entries (default: every scope)");
  args.option("prefix", "P", "only keys starting with P");
  args.flag("json", "one JSON object per entry (docs/cli.md)");
  int code = 0;
  if (!args.parse(code)) return code;
  if (!args.positionals().empty()) {
    std::cerr << "lazycache list: unexpected argument '" << args.positionals().front() << "' (keys go with --prefix)\n";
    return kExitUsage;
  }
  auto store = open_store(args);
  if (!store.ok()) return report_error("list", store.error());
  auto entries = list_store_entries(**store, args.get_opt("scope"), args.get("prefix"));
  if (!entries.ok()) return report_error("list", entries.error());
  mark_entries_in_use(*entries, (*store)->describe());
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  uint64_t total = 0;
  for (const StoreEntry& e : *entries) {
    total += e.object.size;
    if (args.has("json")) {
      std::cout << StoreEntryJson{e.scope,       e.key,       e.object.key, e.object.size, e.object.last_modified_s,
                                  e.last_used_s, e.in_use_by, e.version}
                       .to_json()
                << "\n";
      continue;
    }
    std::cout << e.key << (e.scope.empty() ? "" : "  (scope " + e.scope + ")") << "  paths "
              << (e.version.empty() ? "unversioned" : e.version) << "  " << human_bytes(e.object.size) << "  saved "
              << age_text(now - e.object.last_modified_s) << " ago, used " << age_text(now - e.last_used_s) << " ago"
              << (e.in_use_by.empty() ? "" : ", mounted at " + e.in_use_by) << "\n";
  }
  std::cerr << "lazycache list: " << entries->size() << (entries->size() == 1 ? " entry, " : " entries, ") << human_bytes(total) << " in "
            << (*store)->describe() << "\n";
  return kExitOk;
}

const CommandRegistration kList{"list", "list the entries of a store (key, size, saved, last used)",
                                "[--scope S] [--prefix P] [--json] [--store URL]", run_list};

}  // namespace
}  // namespace lazycache::cli
