// SPDX-License-Identifier: MIT
// `lazycache unmount`: unmount lazycache mounts and print what the job used. See docs/mount.md.
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <set>

#include "common/posix_files.h"
#include "tools/command.h"
#include "tools/json_output.h"
#include "tools/mount_holders.h"
#include "tools/mount_state.h"
#include "tools/process_exit.h"
#include "tools/run_dir_cleanup.h"
#include "tools/unmount_discard.h"
#include "tools/unmount_save.h"

namespace lazycache::cli {
namespace {

// 10 s: the daemon only has to join its threads and write its figures once the kernel lets go.
constexpr auto kDaemonExitWait = std::chrono::seconds(10);

void print_figures(const std::string& path, const fs::MountStats& stats, bool json) {
  if (json) {
    std::cout << JsonObject().add("path", path).add_raw("stats", stats.to_json()).str() << "\n";
  } else {
    std::cout << path << ": " << mount_summary(stats) << "\n";
  }
}

// Waits until the daemon has exited (it writes its final figures just before), then returns its
// last state; nullopt if it has not marked them final within kDaemonExitWait.
std::optional<DaemonState> wait_for_daemon(const DaemonState& d) {
  (void)wait_for_process_exit(d.pid, kDaemonExitWait, [&d] { return daemon_alive(d); });
  DaemonState last = d;
  auto text = read_whole_file(d.state_path, 16 << 20);
  if (text.ok()) {
    if (auto st = DaemonState::parse(*text); st.ok()) {
      last = std::move(st).value();
      last.state_path = d.state_path;
    }
  }
  return last.stopped ? std::optional<DaemonState>(std::move(last)) : std::nullopt;
}

// The unmount itself failed (EBUSY: a file was opened after the busy check, or without --save).
// Nothing is removed; say who holds the path and what to do.
void report_unmount_failure(const std::string& path, const Status& s, bool was_saved) {
  (void)report_error("unmount", s);
  if (s.code() != ErrorCode::kPreconditionFailed) return;
  auto holders = find_mount_holders(path);
  std::cerr << "lazycache unmount: " << path;
  if (!holders.empty()) std::cerr << " is held by " << describe_holders(holders) << ";";
  std::cerr << " it stays mounted";
  if (was_saved) {
    std::cerr << " with its changes and its save record (a file was opened while it was being saved: the entry "
                 "holds the changes up to the save, later ones are not in it, entries are immutable)";
  }
  std::cerr << "; " << busy_advice(path) << "\n";
}

// unmount_path(), and when it fails because the mount's own tree walk holds a directory open (the
// daemon's child right after the mount, fs/tree_walk.h), the walk is asked to end and the unmount
// tried again for up to 2 s. Any other holder's EBUSY is returned at once.
Status unmount_ending_walk(const std::string& path, bool lazy, const std::optional<DaemonState>& daemon) {
  // A kernel overlay's walk lists the detached FUSE mount below it (tools/cmd_mount.cpp), which
  // makes no EBUSY here but keeps that mount, and so the daemon, alive until the walk ends: it
  // is asked to end first (the daemon ignores the signal when no walk runs).
  if (struct statfs st; daemon && ::statfs(path.c_str(), &st) == 0 && st.f_type == OVERLAYFS_SUPER_MAGIC)
    ::kill(daemon->pid, kStopTreeWarmSignal);
  Status s = unmount_path(path, lazy);
  if (s.ok() || lazy || !daemon || s.code() != ErrorCode::kPreconditionFailed) return s;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  bool asked = false;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const MountHolder& h : find_mount_holders(path)) {
      if (!is_daemon_or_its_walk(h, daemon->pid)) return s;
    }
    if (!asked) {
      ::kill(daemon->pid, kStopTreeWarmSignal);
      asked = true;
    }
    ::usleep(2000);
    s = unmount_path(path, false);
    if (s.ok() || s.code() != ErrorCode::kPreconditionFailed) return s;
  }
  return s;
}

int run_unmount(ArgParser& args) {
  args.flag("all",
            "unmount every mount started with this run directory ($LAZYCACHE_RUN_DIR, else /run/lazycache as "
            "root, $XDG_RUNTIME_DIR/lazycache, /tmp/lazycache-UID)");
  args.flag("lazy", "detach even while files are open; the daemon exits when the last one closes");
  args.flag("json", "print the figures as one JSON object per mount point");
  args.flag("save",
            "first save what changed under the primary key mount recorded (docs/writable.md); "
            "a path whose save fails stays mounted");
  int code = 0;
  if (!args.parse(code)) return code;
  std::vector<std::string> paths;
  for (const auto& p : args.positionals()) paths.push_back(absolute_path(p));
  if (args.has("all")) {
    std::set<std::string> all(paths.begin(), paths.end());
    for (const auto& d : list_daemons()) all.insert(d.mountpoints.begin(), d.mountpoints.end());
    paths.assign(all.begin(), all.end());
  } else if (paths.empty()) {
    std::cerr << "lazycache unmount: give PATH... or --all\n";
    return kExitUsage;
  }
  const bool json = args.has("json");
  int rc = kExitOk;
  UnmountSaveResult saved;
  if (args.has("save")) {
    saved = save_before_unmount(paths, !args.has("lazy"));
    rc = saved.exit_code;
  }
  auto contains = [](const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  std::vector<std::string> gone;   // no longer mounted: their saved state may be removed
  std::vector<DaemonState> ended;  // daemons that exited here: their run files go at the end
  for (const auto& path : paths) {
    if (contains(saved.keep_mounted, path)) continue;
    if (clean_stale(path)) {
      std::cerr << "lazycache unmount: " << path << ": cleaned up a stale mount (its daemon was gone)\n";
      gone.push_back(path);
      continue;
    }
    auto daemon = find_daemon(path);
    if (!is_lazycache_mount(path)) {
      if (daemon && !daemon_alive(*daemon)) remove_state_files(*daemon);
      std::cerr << "lazycache unmount: " << path << " is not mounted (nothing to do)\n";
      gone.push_back(path);
      continue;
    }
    Status s = unmount_ending_walk(path, args.has("lazy"), daemon);
    if (!s.ok()) {
      rc = kExitFailure;
      report_unmount_failure(path, s, contains(saved.done, path));
      continue;
    }
    gone.push_back(path);
    if (!daemon) {
      std::cerr << "lazycache unmount: " << path << " unmounted (no figures: its daemon left no state in " << run_dir() << ")\n";
      continue;
    }
    bool others = false;
    for (const auto& m : daemon->mountpoints) others = others || (m != path && is_lazycache_mount(m));
    if (others) {  // the daemon still serves other paths: its figures so far
      print_figures(path, refresh(*daemon).stats, json);
      continue;
    }
    auto final_state = args.has("lazy") ? std::optional<DaemonState>() : wait_for_daemon(*daemon);
    if (final_state) {
      print_figures(path, final_state->stats, json);
      ended.push_back(*final_state);
    } else {
      print_figures(path, refresh(*daemon).stats, json);
      if (!args.has("lazy")) std::cerr << "lazycache unmount: daemon " << daemon->pid << " has not exited yet; figures may be partial\n";
    }
  }
  // The daemons have exited (not with --lazy: they may still serve open files from the upper
  // directories, which are then left for the next unmount --save or by hand).
  // A path that is still mounted keeps its upper directory and record: they are what the mount
  // serves and what a retry of `unmount --save` reads.
  if (!args.has("lazy")) {
    std::vector<std::string> clean;
    for (const auto& p : saved.done) {
      if (contains(gone, p)) clean.push_back(p);
    }
    clean_after_save(clean);
    // Unmounted without --save: the changes go with the mount (a --upper-dir stays the user's).
    std::vector<std::string> unsaved;
    for (const auto& p : gone) {
      if (!contains(saved.done, p)) unsaved.push_back(p);
    }
    discard_unsaved_changes(unsaved);
  }
  // What the daemons that ended (here or before) left in the run directory (after the saves'
  // cleanup above, which reads their records).
  for (const DaemonState& d : ended) remove_daemon_files(d);
  clean_finished_mounts();
  return rc;
}

const CommandRegistration reg{"unmount", "unmount lazycache mounts and print what the job fetched",
                              "[--save] [--lazy] [--json] PATH...|--all", run_unmount};

}  // namespace
}  // namespace lazycache::cli
