// SPDX-License-Identifier: MIT
// `lazycache prune [--older-than D] [--keep-size S] [--dry-run]`: removes entries not used for a
// while and/or the least recently used ones until the rest fit (GitHub's eviction, by hand or
// from a cron job). Never an entry a live mount serves.
#include <ctime>
#include <iostream>

#include "tools/command.h"
#include "tools/progress.h"
#include "tools/store_entries.h"
#include "tools/store_options.h"

namespace lazycache::cli {
namespace {

int run_prune(ArgParser& args) {
  add_store_options(args, StoreUse::kRead);
  args.option("older-than", "D", "remove entries last used more than D ago (7d, 12h, 30m, 90s)");
  args.option("keep-size", "SIZE", "then remove least recently used entries until the rest take at most SIZE");
  args.option("scope", "SCOPE", "only this scope's entries (default: every scope)");
  args.flag("dry-run", "print what would be removed; remove nothing");
  int code = 0;
  if (!args.parse(code)) return code;
  if (!args.has("older-than") && !args.has("keep-size")) {
    std::cerr << "lazycache prune: give --older-than D and/or --keep-size SIZE\n";
    return kExitUsage;
  }
  PrunePolicy policy;
  if (args.has("older-than")) {
    auto d = parse_duration(args.get("older-than"), "--older-than");
    if (!d.ok()) return report_error("prune", d.error());
    policy.older_than_s = *d;
  }
  if (args.has("keep-size")) {
    auto s = args.get_size("keep-size");
    if (!s.ok()) return report_error("prune", s.error());
    policy.keep_bytes = *s;
  }
  auto store = open_store(args);
  if (!store.ok()) return report_error("prune", store.error());
  auto entries = list_store_entries(**store, args.get_opt("scope"), "");
  if (!entries.ok()) return report_error("prune", entries.error());
  mark_entries_in_use(*entries, (*store)->describe());
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  const bool dry = args.has("dry-run");
  uint64_t freed = 0, total = 0;
  size_t removed = 0;
  for (const StoreEntry& e : *entries) total += e.object.size;
  for (size_t i : plan_prune(*entries, policy, now)) {
    const StoreEntry& e = (*entries)[i];
    if (!dry) {
      if (Status s = (*store)->remove(e.object.key); !s.ok()) return report_error("prune", s.with_context("deleting key " + e.key));
    }
    std::cout << (dry ? "would delete" : "deleted") << " key " << e.key << (e.scope.empty() ? "" : " (scope " + e.scope + ")") << ": "
              << human_bytes(e.object.size) << ", last used " << age_text(now - e.last_used_s) << " ago\n";
    freed += e.object.size;
    ++removed;
  }
  for (const StoreEntry& e : *entries)
    if (!e.in_use_by.empty()) std::cerr << "lazycache prune: kept key " << e.key << ": mounted at " << e.in_use_by << "\n";
  std::cerr << "lazycache prune: " << (dry ? "would remove " : "removed ") << removed << " of " << entries->size() << " entries ("
            << human_bytes(freed) << "); " << human_bytes(total - freed) << " left in " << (*store)->describe() << "\n";
  return kExitOk;
}

const CommandRegistration kPrune{"prune", "remove old or least recently used entries of a store",
                                 "[--older-than D] [--keep-size SIZE] [--scope S] [--dry-run] [--store URL]", run_prune};

}  // namespace
}  // namespace lazycache::cli
