// SPDX-License-Identifier: MIT
// File: fs/fuse_adapter.h -- FuseMount: one libfuse 3.14 low-level session at one mount point,
// serving one op table; and the read-only op table, which serves one directory of a Filesystem.
// Part of the FUSE glue (lc_fs_fuse: this file, fs/overlay_fuse.h and fs/fuse_reply.h, the only
// code that speaks FUSE): it translates kernel requests to Filesystem calls and Results to
// replies (errors through fs/errno_map.h). This header itself includes no libfuse header.
//
// - Userdata: each op table has its own (what fuse_req_userdata returns to its handlers), made by
//   the function that mounts it and owned by the FuseMount until the session is gone. The
//   read-only table's holds the Filesystem, the inode numbering and the config; the writable
//   table's (fs/overlay_fuse.h) the Overlay. Neither table knows the other.
// - Inode numbers: fs/inode_numbers.h (the root entry is 1, any other entry id N is N + 2).
//   Hardlinked names share their canonical id, hence one inode. Nothing is kept per inode, so
//   forget() is free and a tree of any size holds no descriptors.
// - Metadata replies carry long entry/attr timeouts, negative lookups are cached, opens set
//   keep_cache and directories cache_readdir: the archive never changes while mounted.
// - Zero-message opens (FuseMountConfig::kernel_opens): the first OPEN and OPENDIR get ENOSYS,
//   and the kernel opens by itself from then on; handle-less READs use fs/inode_handles.h.
// - Every request is counted by kind (fs/request_counts.h; requests()), in both op tables.
// - Reads never block a handler thread on the network: the reply is sent from the fetch thread
//   that completes the frame (or inline on a memory hit).
// - init raises max_background (the kernel's default of 12 caps parallel readahead).
// Thread-safety: the loop runs `max_threads` handler threads; stop() and the destructor may be
// called from any other thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "fs/filesystem.h"
#include "fs/mount_config.h"
#include "fs/request_counts.h"

struct fuse_session;
struct fuse_lowlevel_ops;

namespace lazycache::fs {

// An op table and the object its handlers get as userdata.
struct FuseOps {
  const fuse_lowlevel_ops* table = nullptr;
  std::shared_ptr<void> userdata;     // kept alive by the FuseMount until its session is destroyed
  bool writable = false;              // mounted without "ro"
  RequestCounts* requests = nullptr;  // the table's request counters, inside userdata; may be null
};

// The page-cache hand-off's filter: which inode a decoded archive file is given to the kernel as.
// It calls `store(inode)` (the notify_store) and returns its result, or returns false without
// calling it (the file is not the archive's any more, on a writable mount).
using PageCacheFilter = std::function<bool(EntryId file, const std::function<bool(uint64_t ino)>& store)>;

class FuseMount {
 public:
  // Mounts directory config.root of `fs` read-only at `config.mountpoint` (which must be a
  // directory) and returns without serving yet. `fs` must outlive the mount.
  // Errors: kInvalidArgument (root is not a directory), kIo (the mount call failed; message
  // names the mount point).
  static Result<std::unique_ptr<FuseMount>> mount(Filesystem& fs, FuseMountConfig config);
  // Mounts any op table (fs/overlay_fuse.h's mount_overlay uses it). Errors: kIo, kInternal.
  static Result<std::unique_ptr<FuseMount>> mount(FuseOps op_table, FuseMountConfig config);
  // Stops serving and unmounts (lazily) if still mounted; joins the loop thread.
  ~FuseMount();
  FuseMount(const FuseMount&) = delete;
  FuseMount& operator=(const FuseMount&) = delete;

  // From start() on, hands each file `fs` decodes whole to the kernel's page cache as the inode
  // `filter` names (Filesystem::add_page_cache_sink); until stop(). A read-only mount does this
  // itself; mount_overlay with Overlay::offer_to_page_cache. Call before start().
  void hand_off_page_cache(Filesystem& fs, PageCacheFilter filter);
  // Starts the multithreaded loop on its own thread and returns at once.
  void start();
  // Blocks until the loop has ended (the mount point was unmounted, or stop()).
  void wait();
  bool finished() const { return finished_.load(); }
  // Detaches the mount (umount2 MNT_DETACH): the loop ends once the kernel lets go.
  void stop();
  const std::string& mountpoint() const { return config_.mountpoint; }
  const FuseMountConfig& config() const { return config_; }
  // The requests the kernel has sent this mount so far, per kind (all zero for a table without
  // counters).
  RequestSnapshot requests() const;

 private:
  FuseMount(FuseOps op_table, FuseMountConfig config) : ops_(std::move(op_table)), config_(std::move(config)) {}

  FuseOps ops_;
  FuseMountConfig config_;
  // The page-cache hand-off (hand_off_page_cache()): null when the mount does none.
  Filesystem* handoff_fs_ = nullptr;
  PageCacheFilter handoff_filter_;
  fuse_session* session_ = nullptr;
  std::atomic<bool> finished_{false};
  std::atomic<bool> unmounted_{false};
  std::jthread loop_;
};

}  // namespace lazycache::fs
