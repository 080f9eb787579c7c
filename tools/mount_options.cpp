// SPDX-License-Identifier: MIT
#include "tools/mount_options.h"

#include <cstdlib>
#include <iostream>

#include "fs/chunk_cache.h"
#include "tools/mount_state.h"

namespace lazycache::cli {
namespace {

Status invalid(const std::string& message) { return Status(ErrorCode::kInvalidArgument, message); }

// Every option but the choice of source (--key or --archive), which default_mount_options()
// leaves open.
Result<MountOptions> parse_fields(const ArgParser& args) {
  MountOptions o;
  o.archive = args.get("archive");
  if (args.has("archive") && o.archive.empty()) return invalid("--archive: expected a file");
  if (o.archive.empty()) {
    // The store is opened only for a store entry: an --archive mount ignores store options.
    LC_ASSIGN_OR_RETURN(o.store, store_settings_from(args));
    // Its --memory-budget is frame memory; what its unmount --save uploads within is this.
    LC_ASSIGN_OR_RETURN(o.store.transfer.memory_budget_bytes, args.get_size("upload-budget"));
  }
  o.key = key_options_from(args);
  for (const auto& p : args.positionals()) o.paths.push_back(absolute_path(p));
  o.foreground = args.has("foreground");
  o.json = args.has("json");
  o.fail_on_cache_miss = args.has("fail-on-cache-miss");
  o.read_only = args.has("read-only");
  o.writable = args.has("writable");
  o.allow_other = args.has("allow-other");
  o.allow_nonempty = args.has("allow-nonempty");

  LC_ASSIGN_OR_RETURN(o.cache_size_bytes, args.get_size("cache-size"));
  LC_ASSIGN_OR_RETURN(o.memory_budget_bytes, parse_mount_memory_budget(args.get("memory-budget")));
  LC_ASSIGN_OR_RETURN(int64_t threads, args.get_int("fetch-threads"));
  LC_ASSIGN_OR_RETURN(int64_t timeout_s, args.get_int("read-timeout"));
  if (threads < 1 || threads > 256 || timeout_s < 1) return invalid("--fetch-threads must be 1..256 and --read-timeout at least 1");
  o.fetch_threads = static_cast<int>(threads);
  o.read_timeout_ms = static_cast<uint64_t>(timeout_s) * 1000;

  const std::string prefetch = args.get("prefetch");
  if (prefetch == "none") o.prefetch = fs::PrefetchMode::kNone;
  else if (prefetch == "all") o.prefetch = fs::PrefetchMode::kAll;
  else if (prefetch != "hot") o.prefetch_list = prefetch;  // a file of paths, read when the mount serves

  auto fill = fs::FillPolicy::parse(args.get("fill"));
  if (fill.ok()) {
    o.fill = *fill;
  } else {
    auto cap = args.get_size("fill");
    if (!cap.ok()) return invalid("--fill: expected auto, all, none or a size like 512M, got '" + args.get("fill") + "'");
    o.fill = fs::FillPolicy{fs::FillPolicy::Mode::kBytes, *cap};
  }
  if (args.get("warm-names") != "off") {
    auto names = args.get_int("warm-names");
    if (!names.ok() || *names < 0) return invalid("--warm-names: expected a count or off, got '" + args.get("warm-names") + "'");
    o.warm_names = static_cast<uint64_t>(*names);
  }
  if (args.get("decode-ahead") != "off") {
    auto bytes = args.get_size("decode-ahead");
    if (!bytes.ok()) return invalid("--decode-ahead: expected a size like 512M or off, got '" + args.get("decode-ahead") + "'");
    o.decode_ahead_bytes = *bytes;
  }
  const std::string opens = args.get("open-requests");
  if (opens != "auto" && opens != "always") return invalid("--open-requests: expected auto or always, got '" + opens + "'");
  o.kernel_opens = opens == "auto";
  const std::string overlay = args.get("overlay");
  if (overlay == "auto") o.overlay = MountOptions::OverlayKind::kAuto;
  else if (overlay == "kernel") o.overlay = MountOptions::OverlayKind::kKernel;
  else if (overlay == "fuse") o.overlay = MountOptions::OverlayKind::kFuse;
  else return invalid("--overlay: expected auto, kernel or fuse, got '" + overlay + "'");
  o.cache_dir = args.has("cache-dir") ? args.get("cache-dir") : fs::ChunkCache::default_dir();
  if (args.has("upper-dir")) o.upper_dir = absolute_path(args.get("upper-dir"));
  return o;
}

}  // namespace

void add_mount_options(ArgParser& args) {
  args.option("archive", "FILE", "mount a local archive file instead of a store entry");
  add_store_options(args, StoreUse::kMount);
  add_key_options(args);
  args.flag("foreground", "serve in this process instead of leaving a daemon (Ctrl-C unmounts)");
  args.option("prefetch", "none|hot|all|FILE",
              "what to fetch ahead: the entry's learned hot list (hot), also everything else in the background (all), "
              "the paths listed in FILE then the hot list, or nothing (none: no locality prefetch of a directory's files either)",
              "hot");
  args.option("fill", "auto|all|none|SIZE",
              "how much of the archive to fetch into the chunk cache in the background, behind reads: everything "
              "when it is small against the cache (auto: at most a quarter of --cache-size and 1G), all of it, "
              "nothing, or at most SIZE compressed bytes",
              "auto");
  args.option("warm-names", "N|off",
              "list up to N names of the tree into the kernel's name cache right after the mount, beside the job, so its "
              "first lookups need no round trip to the daemon (off: none)",
              "100000");
  args.option("decode-ahead", "SIZE|off",
              "decode fetched frames whose files the kernel knows (after the name listing) as they arrive and hand "
              "their files to the page cache, up to SIZE decompressed bytes, so the job's reads need no round trip to "
              "the daemon (off: frames are decoded when read)",
              "256M");
  args.option("open-requests", "auto|always",
              "auto: a read-only mount tells the kernel to open files and directories without asking the daemon "
              "(no round trip per open; the access list and the locality prefetch then see only the files read "
              "through the daemon); always: every open is a request (the FUSE overlay of --overlay fuse always asks)",
              "auto");
  args.option("overlay", "auto|kernel|fuse",
              "how a writable mount keeps its changes: kernel = a kernel overlayfs over a read-only FUSE mount (as "
              "root; opens and listings cost no request to the daemon), fuse = the daemon's own overlay; auto = kernel "
              "where it mounts (root, a fresh upper directory), else fuse",
              "auto");
  args.option("cache-dir", "DIR",
              "local chunk cache (default: $LAZYCACHE_CACHE_DIR, ~/.cache/lazycache/chunks, "
              "/var/cache/lazycache/chunks as root)");
  args.option("cache-size", "SIZE", "chunk cache bound; least recently used frames are evicted", "10G");
  args.option("fetch-threads", "N", "range reads in flight", "16");
  args.option("read-timeout", "SECONDS", "a read waiting longer fails with EIO", "30");
  args.flag("read-only", "mount read-only: no upper directory, nothing for unmount --save to save");
  args.flag("writable", "make an --archive mount writable too (store entries are writable by default)");
  args.option("upper-dir", "DIR",
              "where the mount's changes go (default: next to the chunk cache, "
              "CACHE_DIR/../upper/mount-<daemon pid>)");
  args.flag("allow-other", "let other users read the mount (default when run as root)");
  args.flag("allow-nonempty", "mount over a directory that is not empty (its files are hidden, not lost, until unmount)");
  args.flag("json", "print one JSON object (docs/cli.md) instead of the outputs; the summary goes to stderr");
  args.flag("fail-on-cache-miss", "exit 3 when no entry matches (default: leave the paths as plain directories)");
}

Result<MountOptions> parse_mount_options(const ArgParser& args) {
  if (args.has("archive") == args.has("key")) return invalid("give --key (with --store) or --archive FILE");
  return parse_fields(args);
}

Result<uint64_t> parse_mount_memory_budget(const std::string& value) {
  if (value == "auto") return uint64_t{0};
  auto bytes = parse_size_text(value, "--memory-budget");
  if (!bytes.ok()) return invalid("--memory-budget: expected a size like 64M or auto, got '" + value + "'");
  if (*bytes == 0) return invalid("--memory-budget: must be above 0 (auto sizes it from the archive)");
  return bytes;
}

MountOptions default_mount_options() {
  // The defaults live in the declarations only: parse an empty command line against them.
  ArgParser args("mount", "", {});
  add_mount_options(args);
  int code = 0;
  auto options = args.parse(code) ? parse_fields(args) : Result<MountOptions>(invalid("mount's option declarations"));
  // Only a broken default in add_mount_options() can fail here (a programming error, which
  // tests/cli/mount_options_test.cpp would show): say so and stop rather than mount with zeros.
  if (!options.ok()) {
    std::cerr << "lazycache: internal error: mount's defaults do not parse: " << options.error().to_string() << "\n";
    std::abort();
  }
  return std::move(options).value();
}

}  // namespace lazycache::cli
