// SPDX-License-Identifier: MIT
// File: tools/mount_options.h -- `lazycache mount`'s command line as typed values, parsed once
// (issue 19 item 4): what run_mount() (tools/cmd_mount.h) mounts, and what `restore` hands it
// when it mounts (tools/cmd_restore.h) -- no option is turned back into argv and parsed again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "fs/filesystem.h"
#include "fs/fill_policy.h"
#include "tools/command.h"
#include "tools/store_options.h"

namespace lazycache::cli {

struct MountOptions {
  std::string archive;  // --archive FILE (a local archive); "": a store entry of `key`
  // The store and its transfer settings, unused with --archive (then not even parsed). Its memory
  // budget is --upload-budget: what this mount's `unmount --save` uploads within (the save record
  // keeps it, tools/save_record.h); the mount itself uploads nothing.
  StoreSettings store;
  KeyOptions key;
  std::vector<std::string> paths;  // the PATHs, absolute, in the order given
  bool foreground = false;         // --foreground
  bool json = false;               // --json
  bool fail_on_cache_miss = false;
  bool read_only = false;       // --read-only
  bool writable = false;        // --writable (an --archive mount; store entries are writable unless read_only)
  bool allow_other = false;     // --allow-other (root mounts allow other users anyway)
  bool allow_nonempty = false;  // --allow-nonempty
  // --open-requests auto: a read-only mount lets the kernel open files itself (zero-message
  // opens, fs/mount_config.h kernel_opens); always: every open is a request to the daemon.
  bool kernel_opens = true;
  // --overlay: how a writable mount keeps its changes (tools/kernel_overlay.h). kKernel: a kernel
  // overlayfs over a read-only FUSE mount (root only); kFuse: the daemon's own overlay
  // (fs/overlay.h); kAuto: kernel where it mounts, else fuse.
  enum class OverlayKind { kAuto, kKernel, kFuse };
  OverlayKind overlay = OverlayKind::kAuto;
  // --prefetch: none, hot, all, or FILE (kHotList after the paths FILE lists, `prefetch_list`).
  fs::PrefetchMode prefetch = fs::PrefetchMode::kHotList;
  std::string prefetch_list;
  fs::FillPolicy fill;               // --fill: auto, all, none or SIZE (kBytes)
  std::string cache_dir;             // --cache-dir, else fs::ChunkCache::default_dir()
  uint64_t cache_size_bytes = 0;     // --cache-size
  uint64_t memory_budget_bytes = 0;  // --memory-budget: the mount's frame memory; 0: auto (fs::auto_memory_budget)
  int fetch_threads = 0;             // --fetch-threads, 1..256
  uint64_t read_timeout_ms = 0;      // --read-timeout (seconds on the command line, at least 1)
  std::string upper_dir;             // --upper-dir, absolute; "": next to the chunk cache, named by the daemon's pid
  uint64_t warm_names = 0;           // --warm-names: names listed into the kernel at mount (fs/tree_warmer.h); 0: none
  uint64_t decode_ahead_bytes = 0;   // --decode-ahead: FilesystemConfig::decode_ahead_bytes; 0: off

  // A store entry mounted writable: an overlay per mount point and a save record.
  bool writable_mount() const { return !read_only && (archive.empty() || writable); }
  bool operator==(const MountOptions&) const = default;
};

// Declares mount's options on `args` (call before args.parse()): every default is written here.
void add_mount_options(ArgParser& args);
// The one parse of a mount command line. kInvalidArgument naming the option: neither or both of
// --key and --archive, a bad size or number, --fetch-threads outside 1..256, --read-timeout
// below 1, a --fill that is no policy nor size, bad store options (store entries only).
Result<MountOptions> parse_mount_options(const ArgParser& args);
// --memory-budget as mount and restore take it: `auto` is 0 (the filesystem sizes it from the
// archive, fs/memory_budget.h), else a size. kInvalidArgument naming the option.
Result<uint64_t> parse_mount_memory_budget(const std::string& value);
// What an empty mount command line means (add_mount_options' defaults), with no source chosen:
// restore starts from it and sets what its own command line says (tools/cmd_restore.h).
MountOptions default_mount_options();

}  // namespace lazycache::cli
