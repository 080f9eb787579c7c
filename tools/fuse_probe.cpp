// SPDX-License-Identifier: MIT
#include "tools/fuse_probe.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace lazycache::cli {
namespace {

// The FUSE misc device number (Documentation/admin-guide/devices.txt: 10 char, minor 229).
constexpr unsigned kFuseMajor = 10;
constexpr unsigned kFuseMinor = 229;
constexpr int kCapSysAdmin = 21;  // linux/capability.h

std::string errno_text(int err) { return std::strerror(err); }

// One "Key:\tvalue" line of /proc/self/status, or "" when absent.
std::string proc_status_field(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      size_t start = line.find_first_not_of(" \t", key.size() + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  }
  return "";
}

bool has_cap_sys_admin() {
  std::string hex = proc_status_field("CapEff");
  if (hex.empty()) return geteuid() == 0;  // no /proc: assume the classic root model
  unsigned long long caps = std::strtoull(hex.c_str(), nullptr, 16);
  return (caps >> kCapSysAdmin) & 1u;
}

bool kernel_has_fuse_fs() {
  std::ifstream in("/proc/filesystems");
  if (!in) return true;  // cannot tell; the device check already passed
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string a, b;
    fields >> a >> b;
    if (a == "fuse" || b == "fuse") return true;
  }
  return false;
}

// Mounts an (unserved) FUSE filesystem on a fresh temp directory and detaches it at once. The
// kernel sends FUSE_INIT asynchronously, so mount(2) returns without anyone answering; closing
// the device afterwards aborts the connection.
std::string trial_mount(int fd) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/lazycache-fuse-probe.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    return "cannot create a temp directory for the FUSE trial mount (" + dir + "): " + errno_text(errno);
  }
  std::string opts = "fd=" + std::to_string(fd) + ",rootmode=40000,user_id=" + std::to_string(geteuid()) +
                     ",group_id=" + std::to_string(getegid());
  std::string reason;
  if (mount("lazycache-probe", dir.c_str(), "fuse.lazycache-probe", MS_NOSUID | MS_NODEV | MS_RDONLY, opts.c_str()) != 0) {
    int err = errno;
    reason = "mount(2) of a FUSE filesystem was refused: " + errno_text(err) +
             (err == EPERM || err == EACCES ? " (a container without the mount permission, or an AppArmor/seccomp profile that denies it)"
                                            : "");
  } else if (umount2(dir.c_str(), MNT_DETACH) != 0) {
    reason = "the FUSE trial mount on " + dir + " could not be detached: " + errno_text(errno);
  }
  if (rmdir(dir.c_str()) != 0 && reason.empty()) {
    reason = "cannot remove the FUSE trial mount point " + dir + ": " + errno_text(errno);
  }
  return reason;
}

}  // namespace

std::string find_in_path(const std::string& name, const std::string& search_path) {
  std::istringstream dirs(search_path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

FuseProbeResult probe_fuse(const FuseProbeOptions& options) {
  FuseProbeResult r;
  const std::string& dev = options.device;
  struct stat st {};
  if (stat(dev.c_str(), &st) != 0) {
    int err = errno;
    r.reason = dev + (err == ENOENT ? " does not exist (no FUSE device: a container started without --device /dev/fuse?)"
                                    : " cannot be examined: " + errno_text(err));
    return r;
  }
  if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != kFuseMajor || minor(st.st_rdev) != kFuseMinor) {
    std::string what = S_ISCHR(st.st_mode) ? "char " + std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev))
                                           : "not a character device";
    r.reason = dev + " is not the FUSE device (" + what + "; something is bind-mounted over it)";
    return r;
  }
  int fd = open(dev.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    r.reason = dev + " cannot be opened read-write: " + errno_text(errno) +
               " (the device cgroup of a container, or missing permissions on the device node)";
    return r;
  }
  if (!kernel_has_fuse_fs()) {
    close(fd);
    r.reason = "the kernel does not list the fuse filesystem type in /proc/filesystems";
    return r;
  }
  if (has_cap_sys_admin()) {
    r.method = "mount(2)";
    if (options.trial_mount) r.reason = trial_mount(fd);
    close(fd);
    r.usable = r.reason.empty();
    return r;
  }
  close(fd);

  const char* env_path = std::getenv("PATH");
  std::string search = !options.search_path.empty() ? options.search_path : (env_path ? env_path : "");
  std::string fusermount = find_in_path("fusermount3", search);
  if (fusermount.empty()) {
    r.reason = "fusermount3 is not in PATH (" + search +
               ") and this process lacks CAP_SYS_ADMIN to mount by itself "
               "(install the fuse3 package)";
    return r;
  }
  struct stat fst {};
  if (stat(fusermount.c_str(), &fst) != 0 || fst.st_uid != 0 || !(fst.st_mode & S_ISUID)) {
    r.reason = fusermount + " is not set-uid root, so a non-root user cannot mount with it";
    return r;
  }
  if (proc_status_field("NoNewPrivs") == "1") {
    r.reason =
        "this process runs with no_new_privs (systemd NoNewPrivileges=, or a container option), "
        "so the set-uid " +
        fusermount + " cannot gain the privilege to mount";
    return r;
  }
  r.method = "fusermount3 at " + fusermount;
  r.usable = true;
  return r;
}

Status check_allow_other(bool as_root, const std::string& fuse_conf) {
  if (as_root) return Status();
  std::ifstream in(fuse_conf);
  std::string line;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    const size_t end = line.find_last_not_of(" \t\r");
    if (line.substr(start, end - start + 1) == "user_allow_other") return Status();
  }
  return Status(ErrorCode::kPermissionDenied,
                "--allow-other needs 'user_allow_other' in " + fuse_conf +
                    " when not running as root (add that line as root, or mount without --allow-other: then only you can read it)");
}

}  // namespace lazycache::cli
