// SPDX-License-Identifier: MIT
// File: tools/mount_daemon.h -- the process side of `lazycache mount`: becoming a daemon that
// reports readiness to the waiting command, and serving mounts until they are all unmounted.
//
// Startup protocol: the command forks before it creates any thread. The child's stdout and stderr
// are pipes that the parent copies to its own until the child calls ready(); the child then points
// both at its log file (RUN_DIR/mount-<pid>.log) and sends one status byte (the exit code) on a
// third pipe. So the parent returns only once the mounts serve requests (status 0), or with the
// child's error message and exit code; a child that dies during startup is reported as such.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/byte_source.h"
#include "common/status.h"
#include "fs/filesystem.h"
#include "fs/fuse_adapter.h"
#include "fs/tree_warmer.h"
#include "tools/mount_state.h"

namespace lazycache::cli {

// Signals during startup (which can wait long on a store): the parent forwards SIGINT/SIGTERM/
// SIGHUP to the child and exits 128 + signal once the child is gone (2 s at most); the child (or
// a foreground mount) has a watcher thread that, until ready(), answers them at once: it detaches
// the mounts noted so far and exits 128 + signal. After ready(), serve() waits for them instead.
class Daemonizer {
 public:
  // Blocks SIGINT/SIGTERM/SIGHUP/SIGUSR1 (serve() waits for them), ignores SIGPIPE. Then, unless
  // `foreground`, forks: the parent relays the child's output until the child calls ready() (or
  // dies); it exits 0 if the child is serving, else restores its signal mask and returns with
  // in_parent() true and the child's status as parent_exit_code() (the command returns it, and
  // restore extracts instead). The child returns with in_parent() false.
  static Result<Daemonizer> start(bool foreground);
  // Child: output now goes to the log file and the parent gets `exit_code`; a child that failed
  // (exit_code != 0) exits here. Foreground: the startup watcher stops (serve() takes the signals
  // over); after a failure this thread takes SIGINT/SIGTERM again, so a command that goes on
  // (restore extracting) stays interruptible.
  void ready(int exit_code);
  bool foreground() const { return status_fd_ < 0; }
  bool in_parent() const { return parent_exit_code_ >= 0; }
  int parent_exit_code() const { return parent_exit_code_; }
  // A mount point mounted during startup: detached if a signal interrupts the startup.
  void note_mounted(const std::string& mountpoint);

  struct StartupWatch;  // the watcher thread and the mount points it detaches

 private:
  int status_fd_ = -1;
  int parent_exit_code_ = -1;  // >= 0 only in the parent of a fork
  std::shared_ptr<StartupWatch> watch_;
};

// A ByteSource that counts the reads made through it (the mount's "range reads at mount"). The
// mount's every read goes through it: it forwards streaming (a run's frames delivered as its
// bytes come) and cancel() (the fill's reads ended at exit), which the defaults would drop.
class CountingSource final : public ByteSource {
 public:
  explicit CountingSource(std::shared_ptr<const ByteSource> inner) : inner_(std::move(inner)) {}
  uint64_t size() const override { return inner_->size(); }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override {
    reads_.fetch_add(1, std::memory_order_relaxed);
    return inner_->read_at(offset, out);
  }
  Result<size_t> read_at_streaming(uint64_t offset, std::span<std::byte> out, const ReadProgress& progress) const override {
    reads_.fetch_add(1, std::memory_order_relaxed);
    return inner_->read_at_streaming(offset, out, progress);
  }
  void cancel() const override { inner_->cancel(); }
  Status read_ranges(std::span<ReadRequest> requests) const override {
    reads_.fetch_add(requests.size(), std::memory_order_relaxed);
    return inner_->read_ranges(requests);
  }
  std::string describe() const override { return inner_->describe(); }
  uint64_t reads() const { return reads_.load(); }

 private:
  std::shared_ptr<const ByteSource> inner_;
  mutable std::atomic<uint64_t> reads_{0};
};

struct ServeInfo {
  std::string archive;  // description for status
  std::string key;
};

// Writes the state file serve() will keep, before the mounts serve (seq 0, running, no figures):
// a kernel overlay (tools/kernel_overlay.h) shows in the mount table before the command returns,
// and `status` and `unmount` then find its daemon already.
Status announce_mounts(const std::vector<std::string>& mountpoints, const ServeInfo& info);

// Writes the state file, then serves until every mount has ended (unmounted from outside, or
// SIGINT/SIGTERM/SIGHUP, which detach them all). Rewrites the state file every 500 ms, at once on
// SIGUSR1, and once more, marked stopped, as soon as the last mount has ended (a mount's end
// raises SIGUSR2 in the daemon, which wakes the wait), with the access order. Returns the exit code.
// `warmers` list the mounts' trees (fs/tree_warmer.h): kStopTreeWarmSignal ends them, and so does
// a stop signal, before the mounts are detached; their figures are part of the state file's.
// `before_access_list`, if set, runs before each write of the access list (the open feed of kernel
// overlays, tools/overlay_open_feed.h, delivers the opens still queued).
int serve(fs::Filesystem& filesystem, std::vector<std::unique_ptr<fs::FuseMount>>& mounts,
          std::vector<std::unique_ptr<fs::TreeWarmer>>& warmers, const ServeInfo& info,
          const std::function<void()>& before_access_list = {});

}  // namespace lazycache::cli
