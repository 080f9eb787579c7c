// SPDX-License-Identifier: MIT
#include "tools/mount_state.h"

#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/posix_files.h"
#include "tools/mount_table.h"
#include "tools/umount_ahead.h"

namespace lazycache::cli {

std::string run_dir() {
  if (const char* env = std::getenv("LAZYCACHE_RUN_DIR"); env != nullptr && *env == '/') return env;
  if (geteuid() == 0) return "/run/lazycache";
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && *xdg == '/') return std::string(xdg) + "/lazycache";
  return "/tmp/lazycache-" + std::to_string(geteuid());
}

std::string DaemonState::to_text() const {
  std::ostringstream out;
  out << "pid=" << pid << "\nstart=" << start_ticks << "\nseq=" << seq << "\nstate=" << (stopped ? "stopped" : "running")
      << "\narchive=" << archive << "\nkey=" << key << "\n";
  for (const auto& m : mountpoints) out << "mountpoint=" << m << "\n";
  out << stats.to_text();
  return out.str();
}

Result<DaemonState> DaemonState::parse(const std::string& text) {
  DaemonState s;
  std::istringstream in(text);
  std::string line, numbers;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "pid") s.pid = static_cast<pid_t>(std::atol(v.c_str()));
    else if (k == "start") s.start_ticks = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "seq") s.seq = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "state") s.stopped = v == "stopped";
    else if (k == "archive") s.archive = v;
    else if (k == "key") s.key = v;
    else if (k == "mountpoint") s.mountpoints.push_back(v);
    else numbers += line + "\n";
  }
  if (s.pid <= 0) return Status(ErrorCode::kCorrupt, "mount state without a pid");
  LC_ASSIGN_OR_RETURN(s.stats, fs::MountStats::from_text(numbers));
  return s;
}

std::vector<DaemonState> list_daemons() {
  std::vector<DaemonState> out;
  const std::string dir = run_dir();
  for (const std::string& name : list_dir(dir)) {
    if (name.rfind("mount-", 0) != 0 || name.size() < 7 || name.substr(name.size() - 6) != ".state") continue;
    auto text = read_whole_file(dir + "/" + name, 16 << 20);
    if (!text.ok()) continue;
    auto st = DaemonState::parse(*text);
    if (!st.ok()) continue;
    st->state_path = dir + "/" + name;
    out.push_back(std::move(st).value());
  }
  return out;
}

std::optional<DaemonState> find_daemon(const std::string& mountpoint) {
  for (auto& d : list_daemons()) {
    for (const auto& m : d.mountpoints) {
      if (m == mountpoint) return d;
    }
  }
  return std::nullopt;
}

namespace {

struct ProcStat {
  char state = '?';
  uint64_t start_ticks = 0;
};

// `path` is /proc/PID/stat or /proc/PID/task/TID/stat.
std::optional<ProcStat> read_proc_stat(const std::string& path) {
  auto text = read_whole_file(path, 4096);
  if (!text.ok()) return std::nullopt;
  // "pid (comm) S ppid ...": comm may hold spaces and ')', so fields count from the last ')'.
  const size_t close = text->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(text->substr(close + 1));
  ProcStat st;
  std::string field;
  for (int n = 3; n <= 22 && (in >> field); ++n) {
    if (n == 3) st.state = field.empty() ? '?' : field[0];
    if (n == 22) {
      st.start_ticks = std::strtoull(field.c_str(), nullptr, 10);
      return st;
    }
  }
  return std::nullopt;
}

}  // namespace

bool process_alive(pid_t pid) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno != EPERM)) return false;
  // kill(0) succeeds on a zombie: a killed daemon nobody has reaped is gone. A killed
  // multi-threaded process shows its leader as Z while other threads still exit, and its
  // /dev/fuse descriptor (what makes the mount point stale) closes only with the last one.
  auto running = [](const std::optional<ProcStat>& st) { return st && st->state != 'Z' && st->state != 'X'; };
  const std::string proc = "/proc/" + std::to_string(pid);
  auto st = read_proc_stat(proc + "/stat");
  if (!st || running(st)) return true;
  for (const std::string& tid : list_dir(proc + "/task")) {
    if (running(read_proc_stat(proc + "/task/" + tid + "/stat"))) return true;
  }
  return false;
}

std::optional<uint64_t> process_start_ticks(pid_t pid) {
  auto st = read_proc_stat("/proc/" + std::to_string(pid) + "/stat");
  if (!st) return std::nullopt;
  return st->start_ticks;
}

bool daemon_alive(const DaemonState& d) {
  if (!process_alive(d.pid)) return false;
  if (d.start_ticks != 0) {
    auto now = process_start_ticks(d.pid);
    return !now || *now == d.start_ticks;
  }
  auto comm = read_whole_file("/proc/" + std::to_string(d.pid) + "/comm", 256);
  return !comm.ok() || comm->rfind("lazycache", 0) == 0;
}

void remove_state_files(const DaemonState& d) {
  ::unlink(d.state_path.c_str());
  const std::string access = d.state_path.substr(0, d.state_path.size() - 6) + ".access";
  ::unlink(access.c_str());
  ::unlink((access + ".live").c_str());
}

DaemonState refresh(const DaemonState& d) {
  if (d.stopped || !daemon_alive(d)) return d;
  // Only signal our own daemon: a recycled pid must not get a SIGUSR1 (which would kill it).
  auto comm = read_whole_file("/proc/" + std::to_string(d.pid) + "/comm", 256);
  if (!comm.ok() || comm->rfind("lazycache", 0) != 0 || ::kill(d.pid, SIGUSR1) != 0) return d;
  for (int i = 0; i < 200; ++i) {
    auto text = read_whole_file(d.state_path, 16 << 20);
    if (text.ok()) {
      auto st = DaemonState::parse(*text);
      if (st.ok() && st->seq > d.seq) {
        st->state_path = d.state_path;
        return std::move(st).value();
      }
    }
    ::usleep(10000);
  }
  return d;
}

std::vector<std::string> lazycache_mounts() {
  std::vector<std::string> out;
  for (const MountEntry& e : read_mount_table()) {
    if (is_lazycache_entry(e)) out.push_back(e.mountpoint);
  }
  return out;
}

bool is_lazycache_mount(const std::string& path) {
  for (const auto& m : lazycache_mounts()) {
    if (m == path) return true;
  }
  return false;
}

bool is_stale_mount(const std::string& path) {
  // statfs always reaches the daemon: stat may be answered from the kernel's attribute cache
  // (we hand out day-long timeouts) even after the daemon is gone.
  struct statfs st;
  if (::statfs(path.c_str(), &st) != 0 && errno == ENOTCONN) return true;
  // A kernel overlay (tools/kernel_overlay.h) answers statfs from its upper directory. A name
  // looked up for the first time goes to the FUSE mount below it, which answers ENOTCONN once its
  // daemon is gone (ENOENT while it lives): a fresh name each time, since the overlay keeps the
  // negative entries it was told of. Asking the state files instead would call a live overlay
  // stale to a command run with another run directory.
  bool overlay = false;
  for (const MountEntry& e : read_mount_table()) overlay = overlay || (e.mountpoint == path && is_lazycache_overlay_entry(e));
  if (!overlay) return false;
  static std::atomic<uint64_t> probes{0};
  const std::string probe = path + "/.lazycache-stale-probe-" + std::to_string(::getpid()) + "-" + std::to_string(++probes);
  struct stat ps;
  return ::lstat(probe.c_str(), &ps) != 0 && (errno == ENOTCONN || errno == ECONNABORTED);
}

Status unmount_path(const std::string& path, bool lazy) {
  if (geteuid() == 0) {
    const int err = umount_ahead_of_teardown(path, lazy ? MNT_DETACH : 0);  // the kernel's teardown goes on behind
    if (err == 0) return Status();
    errno = err;
    if (errno == EBUSY) {
      return Status(ErrorCode::kPreconditionFailed, path +
                                                        " is busy: a process has a file open or its working directory below it "
                                                        "(close them, or use --lazy to detach now and finish when they close)");
    }
    return errno_status("unmount " + path);
  }
  std::vector<std::string> argv_s = {"fusermount3", "-u"};
  if (lazy) argv_s.emplace_back("-z");
  argv_s.push_back(path);
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, "fusermount3", nullptr, nullptr, argv.data(), environ) != 0) {
    return Status(ErrorCode::kIo, "cannot run fusermount3 to unmount " + path);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status();
  return Status(ErrorCode::kPreconditionFailed, "fusermount3 -u " + path + " failed (busy? use --lazy)");
}

bool clean_stale(const std::string& path) {
  bool cleaned = false;
  if (is_stale_mount(path)) {
    ignore_error(unmount_path(path, true), "reported by the caller's next step if the path stays unusable");
    cleaned = true;
  }
  for (const auto& d : list_daemons()) {
    if (daemon_alive(d)) continue;
    for (const auto& m : d.mountpoints) {
      // Only the file: whether PATH is mounted (maybe by a newer daemon) is not this entry's say.
      if (m == path) remove_state_files(d);
    }
  }
  return cleaned;
}

std::string mount_summary(const fs::MountStats& s) {
  char pct[32];
  std::snprintf(pct, sizeof(pct), "%.1f%%",
                s.archive_bytes ? 100.0 * static_cast<double>(s.store_bytes) / static_cast<double>(s.archive_bytes) : 0.0);
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%.1f s", s.uptime_seconds);
  std::ostringstream out;
  out << "fetched " << human_bytes(s.store_bytes) << " of " << human_bytes(s.archive_bytes) << " (" << pct << "; "
      << human_bytes(s.on_demand_bytes) << " on demand, " << human_bytes(s.fill_bytes) << " by prefetch and fill of "
      << human_bytes(s.fill_target_bytes) << " queued) in " << s.store_range_reads << " range reads (+" << s.mount_range_reads
      << " at mount); frames: " << s.frames_from_store << " from the store, " << s.frames_from_chunk_cache << " chunk-cache hits, "
      << s.frames_from_memory << " memory hits, " << s.prefetched_frames << " prefetched; " << s.files_opened << " files opened, "
      << human_bytes(s.bytes_served) << " served";
  if (s.read_errors || s.fetch_errors) out << "; " << s.read_errors << " read errors (" << s.read_timeouts << " timeouts)";
  // The tree walk at mount (fs/tree_warmer.h): "names listed: 22851 in 2884 directories, 0.6 s".
  if (s.warm_entries > 0) {
    char warm[32];
    std::snprintf(warm, sizeof(warm), "%.1f s", static_cast<double>(s.warm_ms) / 1000.0);
    out << "; names listed: " << s.warm_entries << " in " << s.warm_directories << " directories, " << warm
        << (s.warm_active ? " so far" : "");
  }
  // The kernel's requests, the kinds it sent at all ("requests: lookup 120, getattr 1, ...").
  const char* sep = "; requests: ";
  for (size_t i = 0; i < s.requests.size(); ++i) {
    if (s.requests[i] == 0) continue;
    out << sep << fs::request_name(static_cast<fs::FuseRequest>(i)) << " " << s.requests[i];
    sep = ", ";
  }
  out << "; " << secs;
  return out.str();
}

std::string absolute_path(const std::string& path) {
  std::string p = path;
  if (p.empty() || p[0] != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof(cwd)) != nullptr) p = std::string(cwd) + "/" + p;
  }
  // Normalise ".", ".." and repeated slashes lexically.
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(p);
  while (std::getline(in, part, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (const auto& s : parts) out += "/" + s;
  return out.empty() ? "/" : out;
}

}  // namespace lazycache::cli
