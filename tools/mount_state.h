// SPDX-License-Identifier: MIT
// File: tools/mount_state.h -- how `mount`, `unmount` and `status` find each other's daemons.
//
// Each mount daemon owns one state file, RUN_DIR/mount-<pid>.state, rewritten (temp + rename)
// every half second and once more when it stops:
//   pid=<pid>  start=<process start time>  seq=<writes>  state=running|stopped
//   archive=<description>  key=<matched key>
//   mountpoint=<abs path>            (one line per mount point it serves)
//   <MountStats key=value lines>     (fs/mount_stats.h)
// and, when it stops, RUN_DIR/mount-<pid>.access: the archive paths of the files the job opened,
// in first-open order (the hot list for the next save).
// RUN_DIR is $LAZYCACHE_RUN_DIR, else /run/lazycache as root, else $XDG_RUNTIME_DIR/lazycache,
// else /tmp/lazycache-<uid>.
// A daemon that was killed leaves its state file and a mount point that fails with ENOTCONN
// ("stale"): `status`, `unmount` (PATH or --all) and the next mount of that path detach it and
// remove the file. A daemon counts as gone when its pid is unused, a zombie (killed but not yet
// reaped: containers whose PID 1 does not reap keep them), or taken by another process (its
// start time differs from the one recorded in the state file).
#pragma once

#include <sys/types.h>

#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include "common/byte_format.h"
#include "common/status.h"
#include "fs/mount_stats.h"

namespace lazycache::cli {

// Sent by `lazycache unmount` to a daemon whose tree walk (fs/tree_warmer.h) keeps the mount busy:
// "end the walk". SIGURG: its default action is to ignore it, so a daemon that predates it, or
// any process a stale pid now names, is not killed by it.
inline constexpr int kStopTreeWarmSignal = SIGURG;

std::string run_dir();

struct DaemonState {
  pid_t pid = 0;
  // Start time of the process in clock ticks since boot (/proc/PID/stat field 22); 0 when the
  // file predates it. Tells a reused pid from the daemon.
  uint64_t start_ticks = 0;
  uint64_t seq = 0;  // bumped by every write of the state file
  bool stopped = false;
  std::string archive;
  std::string key;
  std::vector<std::string> mountpoints;
  fs::MountStats stats;
  std::string state_path;

  std::string to_text() const;
  static Result<DaemonState> parse(const std::string& text);
};

// Every readable state file in run_dir().
std::vector<DaemonState> list_daemons();
// The daemon state that lists `mountpoint` (absolute), if any.
std::optional<DaemonState> find_daemon(const std::string& mountpoint);
// True while `pid` names a running process: false for unused pids and for zombies.
bool process_alive(pid_t pid);
// Start time of `pid` in clock ticks since boot, or nullopt if it is gone or unreadable.
std::optional<uint64_t> process_start_ticks(pid_t pid);
// True while the daemon that wrote `d` still runs: its pid is alive, not a zombie, and has the
// recorded start time (a file without one: the process is named lazycache*).
bool daemon_alive(const DaemonState& d);
// Asks a running daemon for fresh figures (SIGUSR1) and waits up to 2 s for them; returns the
// newest state it has (the given one if the daemon is gone or does not answer).
DaemonState refresh(const DaemonState& d);

// Is `path` a mount point of a lazycache FUSE file system (per /proc/self/mountinfo)?
bool is_lazycache_mount(const std::string& path);
// Every lazycache mount point on the machine.
std::vector<std::string> lazycache_mounts();
// True when the path is a FUSE mount whose daemon is gone (stat gives ENOTCONN).
bool is_stale_mount(const std::string& path);

// Unmounts `path`: umount2 as root, else fusermount3 -u. `lazy` detaches even while files are
// open (the daemon serves them until closed). Errors: kPreconditionFailed "busy" (EBUSY: a file
// is open or a working directory is below it), kIo otherwise.
Status unmount_path(const std::string& path, bool lazy);
// Removes the files of a daemon that is gone: its state file and its hot lists (.access,
// .access.live).
void remove_state_files(const DaemonState& d);
// Detaches a stale mount at `path` and removes state files of dead daemons naming it.
// Returns true only if a stale mount was detached (a leftover state file alone does not count,
// so a live mount at `path` is never mistaken for a cleaned one).
bool clean_stale(const std::string& path);

// The human summary: "fetched 12.0 MiB of 830.1 MiB (1.4%) in 6 range reads (+1 at mount);
// frames: 6 from the store, 0 chunk-cache hits, ...; 14 files opened, ...; 1.2 s".
std::string mount_summary(const fs::MountStats& stats);

// Absolute, normalised form of a command-line path (no symlink resolution for missing paths).
std::string absolute_path(const std::string& path);

}  // namespace lazycache::cli
