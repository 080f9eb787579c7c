// SPDX-License-Identifier: MIT
// File: fs/fuse_adapter.h -- FuseMount: one libfuse 3.14 low-level session that serves one
// directory of a Filesystem at one mount point. The only file that knows FUSE: it translates
// kernel requests to Filesystem calls and Results to replies (errors through fs/errno_map.h).
//
// - Inode numbers: the session's root entry is FUSE_ROOT_ID (1); any other entry id N is N + 2.
//   Hardlinked names share their canonical id, hence one inode. Nothing is kept per inode, so
//   forget() is free and a tree of any size holds no descriptors.
// - Metadata replies carry long entry/attr timeouts, negative lookups are cached, opens set
//   keep_cache and directories cache_readdir: the archive never changes while mounted.
// - Reads never block a handler thread on the network: the reply is sent from the fetch thread
//   that completes the frame (or inline on a memory hit).
// - init raises max_background (the kernel's default of 12 caps parallel readahead).
// Thread-safety: the loop runs `max_threads` handler threads; stop() and the destructor may be
// called from any other thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "fs/filesystem.h"

struct fuse_session;

namespace lazycache::fs {

class Overlay;

struct FuseMountConfig {
  std::string mountpoint;
  EntryId root = 0;          // the directory entry served as the mount's top
  bool allow_other = false;  // let other users in (root, or user_allow_other in /etc/fuse.conf)
  // One day: the archive is immutable, so the kernel may trust what it was told until unmount.
  double timeout_seconds = 86400;
  // Handler threads. Replies come from fetch threads, so handlers never wait on the network;
  // 16 covers metadata storms (find, stat) on 2-8 cores.
  int max_threads = 16;
  // 64 background requests (readahead, async reads) instead of the kernel's 12.
  unsigned max_background = 64;
  std::string fsname = "lazycache";
  // Writable mount: every request goes to this overlay (fs/overlay_fuse.h), which outlives the
  // mount. Null: the read-only op table above.
  Overlay* overlay = nullptr;
};

class FuseMount {
 public:
  // Mounts `config.mountpoint` (which must be a directory) and returns without serving yet.
  // Errors: kInvalidArgument (root is not a directory), kIo (the mount call failed; message
  // names the mount point).
  static Result<std::unique_ptr<FuseMount>> mount(Filesystem& fs, FuseMountConfig config);
  // Stops serving and unmounts (lazily) if still mounted; joins the loop thread.
  ~FuseMount();
  FuseMount(const FuseMount&) = delete;
  FuseMount& operator=(const FuseMount&) = delete;

  // Starts the multithreaded loop on its own thread and returns at once.
  void start();
  // Blocks until the loop has ended (the mount point was unmounted, or stop()).
  void wait();
  bool finished() const { return finished_.load(); }
  // Detaches the mount (umount2 MNT_DETACH): the loop ends once the kernel lets go.
  void stop();
  const std::string& mountpoint() const { return config_.mountpoint; }

  // Used by the op table (fuse_adapter.cpp); not for callers.
  Filesystem& filesystem() { return fs_; }
  const FuseMountConfig& config() const { return config_; }
  EntryId to_id(uint64_t ino) const;
  uint64_t to_ino(EntryId id) const;

 private:
  FuseMount(Filesystem& fs, FuseMountConfig config) : fs_(fs), config_(std::move(config)) {}

  Filesystem& fs_;
  FuseMountConfig config_;
  fuse_session* session_ = nullptr;
  std::atomic<bool> finished_{false};
  std::atomic<bool> unmounted_{false};
  std::jthread loop_;
};

}  // namespace lazycache::fs
