// SPDX-License-Identifier: MIT
// `lazycache cache stats|gc|clear`: the local chunk cache shared by all mounts. See docs/mount.md.
#include <iostream>

#include "fs/chunk_cache.h"
#include "fs/mount_stats.h"
#include "tools/command.h"
#include "tools/mount_state.h"

namespace lazycache::cli {
namespace {

int run_cache(ArgParser& args) {
  args.option("cache-dir", "DIR",
              "the chunk cache (default: $LAZYCACHE_CACHE_DIR, ~/.cache/lazycache/chunks, "
              "/var/cache/lazycache/chunks as root)");
  args.option("cache-size", "SIZE", "the bound gc evicts down to", "10G");
  args.flag("json", "print figures as JSON");
  int code = 0;
  if (!args.parse(code)) return code;
  if (args.positionals().size() != 1) {
    std::cerr << "lazycache cache: give one of stats, gc, clear\n";
    return kExitUsage;
  }
  const std::string action = args.positionals()[0];
  if (action != "stats" && action != "gc" && action != "clear") {
    std::cerr << "lazycache cache: unknown action '" << action << "' (stats, gc, clear)\n";
    return kExitUsage;
  }
  auto size = args.get_size("cache-size");
  if (!size.ok()) return report_error("cache", size.error());
  const std::string dir = args.has("cache-dir") ? args.get("cache-dir") : fs::ChunkCache::default_dir();
  auto cache = fs::ChunkCache::open({dir, *size});
  if (!cache.ok()) return report_error("cache", cache.error());
  const bool json = args.has("json");
  if (action == "gc") {
    auto r = (*cache)->gc();
    if (!r.ok()) return report_error("cache", r.error());
    if (json) {
      std::cout << "{\"evicted_chunks\":" << r->evicted_chunks << ",\"orphan_files_removed\":" << r->orphan_files_removed
                << ",\"missing_rows_removed\":" << r->missing_rows_removed << ",\"bytes_freed\":" << r->bytes_freed << "}\n";
    } else {
      std::cout << "evicted " << r->evicted_chunks << " chunks, removed " << r->orphan_files_removed << " orphan files and "
                << r->missing_rows_removed << " dangling rows; freed " << human_bytes(r->bytes_freed) << "\n";
    }
  } else if (action == "clear") {
    Status s = (*cache)->clear();
    if (!s.ok()) return report_error("cache", s);
    if (!json) std::cout << "cleared " << (*cache)->dir() << "\n";
  }
  auto st = (*cache)->stats();
  if (!st.ok()) return report_error("cache", st.error());
  if (json) {
    std::cout << "{\"dir\":\"" << (*cache)->dir() << "\",\"chunks\":" << st->chunk_count << ",\"bytes\":" << st->total_bytes
              << ",\"max_bytes\":" << st->max_bytes << "}\n";
  } else {
    std::cout << (*cache)->dir() << ": " << st->chunk_count << " chunks, " << human_bytes(st->total_bytes) << " of "
              << human_bytes(st->max_bytes) << "\n";
  }
  return kExitOk;
}

const CommandRegistration reg{"cache", "inspect or trim the local chunk cache", "[--cache-dir DIR] stats|gc|clear", run_cache};

}  // namespace
}  // namespace lazycache::cli
