// SPDX-License-Identifier: MIT
#include "tools/mount_holders.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "common/posix_files.h"
#include "format/quote.h"
#include "tools/mount_table.h"

namespace lazycache::cli {
namespace {

std::string read_link(const std::string& path) {
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// The mnt_id line of an fdinfo file, or -1. Read with one read(2) into the stack: this runs for
// every descriptor of every process (the busy check before `unmount --save`), where an ifstream
// per file cost an allocation and a locale each.
int fdinfo_mount_id(const std::string& fdinfo) {
  UniqueFd fd(::open(fdinfo.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return -1;
  char buf[1024];  // pos, flags, mnt_id and ino come first; the rest (locks, inotify marks) is not needed
  const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* at = std::strstr(buf, "\nmnt_id:");
  return at ? std::atoi(at + 8) : -1;
}

// A /proc file's text, or "" when it is gone (the process ended meanwhile).
std::string proc_text(const std::string& path, size_t max_bytes) {
  auto text = read_whole_file(path, max_bytes);
  return text.ok() ? std::move(text).value() : std::string();
}

// The mount a magic link of /proc/PID (cwd, root, exe) points into: opened O_PATH, which jumps
// straight to the dentry without a lookup or an open on the file system it lives on.
int link_mount_id(const std::string& link) {
  int fd = ::open(link.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return -1;
  int id = fdinfo_mount_id("/proc/self/fdinfo/" + std::to_string(fd));
  ::close(fd);
  return id;
}

std::vector<std::string> numeric_entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') out.emplace_back(e->d_name);
  }
  ::closedir(d);
  return out;
}

// The parent pid from /proc/PID/stat ("pid (comm) state ppid ..."; comm may hold spaces and
// parentheses, so the fields are counted from the last ')'), or 0.
pid_t parent_of(const std::string& proc) {
  const std::string stat = proc_text(proc + "/stat", 4096);
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  int ppid = 0;
  return std::sscanf(stat.c_str() + close + 1, " %*c %d", &ppid) == 1 ? ppid : 0;
}

void scan_process(pid_t pid, const MountEntry& m, std::vector<MountHolder>& out) {
  if (pid == ::getpid()) return;  // this process holds nothing under the mount it checks
  const std::string proc = "/proc/" + std::to_string(pid);
  std::string comm = proc_text(proc + "/comm", 4096);
  if (!comm.empty() && comm.back() == '\n') comm.pop_back();
  pid_t parent = -1;  // read once, for the first hold found
  auto add = [&](std::string what) {
    if (parent < 0) parent = parent_of(proc);
    out.push_back(MountHolder{pid, parent, comm, std::move(what)});
  };
  for (const char* link : {"cwd", "root", "exe"}) {
    if (link_mount_id(proc + "/" + link) == m.mount_id) {
      add(std::string(link) == "cwd" ? "working directory " + format::quote_path(read_link(proc + "/cwd"))
                                     : std::string(link) + " " + format::quote_path(read_link(proc + "/" + link)));
    }
  }
  for (const std::string& fd : numeric_entries(proc + "/fd")) {
    if (fdinfo_mount_id(proc + "/fdinfo/" + fd) == m.mount_id) add("fd " + fd + " " + format::quote_path(read_link(proc + "/fd/" + fd)));
  }
  // Mappings of files on the mount (an executable or library run from it).
  const std::string maps = proc_text(proc + "/maps", 256u << 20);
  std::string last;
  for (size_t at = 0, nl; at < maps.size(); at = nl + 1) {
    nl = maps.find('\n', at);
    if (nl == std::string::npos) nl = maps.size();
    const std::string line = maps.substr(at, nl - at);
    unsigned major = 0, minor = 0;
    unsigned long inode = 0;
    int path_at = 0;
    // "start-end perms offset MM:mm inode   path"
    if (std::sscanf(line.c_str(), "%*s %*s %*s %x:%x %lu %n", &major, &minor, &inode, &path_at) < 3) continue;
    if (inode == 0 || major != m.dev_major || minor != m.dev_minor) continue;
    std::string path = line.substr(static_cast<size_t>(path_at));
    if (path != last) add("maps " + format::quote_path(path));
    last = path;
  }
}

}  // namespace

std::vector<MountHolder> find_mount_holders(const std::string& mountpoint) {
  std::vector<MountHolder> out;
  std::optional<MountEntry> mount;
  const std::string below = mountpoint == "/" ? "/" : mountpoint + "/";
  for (const MountEntry& e : read_mount_table()) {
    if (e.mountpoint == mountpoint) mount = e;  // the last one is the visible one
    else if (e.mountpoint.rfind(below, 0) == 0) out.push_back(MountHolder{0, 0, e.mountpoint, "mounted below"});
  }
  if (!mount) return {};
  for (const std::string& pid : numeric_entries("/proc")) scan_process(static_cast<pid_t>(std::atol(pid.c_str())), *mount, out);
  return out;
}

bool is_daemon_or_its_walk(const MountHolder& h, pid_t daemon_pid) {
  return daemon_pid > 0 && (h.pid == daemon_pid || h.parent == daemon_pid);
}

std::string describe_holders(const std::vector<MountHolder>& holders, size_t max) {
  std::string out;
  for (size_t i = 0; i < holders.size() && i < max; ++i) {
    const MountHolder& h = holders[i];
    if (!out.empty()) out += "; ";
    if (h.pid == 0) out += format::quote_path(h.name) + " is mounted below it";
    else out += "pid " + std::to_string(h.pid) + " (" + h.name + "): " + h.what;
  }
  if (holders.size() > max) out += "; and " + std::to_string(holders.size() - max) + " more";
  return out;
}

std::string busy_advice(const std::string& mountpoint) {
  return "find what holds it with `fuser -vm " + mountpoint +
         "`, close those files or leave the directory, then run the "
         "same unmount again";
}

}  // namespace lazycache::cli
