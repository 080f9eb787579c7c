// SPDX-License-Identifier: MIT
#include "tools/run_dir_cleanup.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "tools/save_record.h"

namespace lazycache::cli {

bool mount_finished(const DaemonState& d) {
  // A daemon that died without writing "stopped" (killed) is "stale": status and unmount report
  // and clean those themselves (clean_stale).
  if (!d.stopped) return false;
  for (const auto& m : d.mountpoints)
    if (is_lazycache_mount(m)) return false;
  return true;
}

void remove_daemon_files(const DaemonState& d) {
  for (const auto& m : d.mountpoints) {
    auto record = read_save_record(m);
    if (record.ok() && record->pid == d.pid) ::unlink(save_record_path(m).c_str());
  }
  const std::string log = run_dir() + "/mount-" + std::to_string(d.pid) + ".log";
  struct stat st {};
  if (::stat(log.c_str(), &st) == 0 && st.st_size == 0) ::unlink(log.c_str());
  remove_state_files(d);
}

namespace {

// Files "mount-<pid>.<suffix>" whose daemon left no state file and is not running: a `mount`
// that ended before serving (a miss, a refused path) leaves its daemon's empty log.
void remove_orphan_files() {
  const std::string dir = run_dir();
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("mount-", 0) != 0) continue;
    const size_t dot = name.find('.');
    if (dot == std::string::npos || name.substr(dot) == ".state") continue;
    const std::string pid_text = name.substr(6, dot - 6);
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(pid_text.c_str()));
    const std::string base = dir + "/mount-" + pid_text;
    struct stat st {};
    if (process_alive(pid) || ::stat((base + ".state").c_str(), &st) == 0) continue;
    const std::string path = dir + "/" + name;
    if (name.substr(dot) == ".log" && (::stat(path.c_str(), &st) != 0 || st.st_size != 0)) continue;
    ::unlink(path.c_str());
  }
  ::closedir(d);
}

}  // namespace

size_t clean_finished_mounts() {
  size_t n = 0;
  for (const DaemonState& d : list_daemons()) {
    if (!mount_finished(d)) continue;
    remove_daemon_files(d);
    ++n;
  }
  remove_orphan_files();
  return n;
}

}  // namespace lazycache::cli
