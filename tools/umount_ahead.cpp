// SPDX-License-Identifier: MIT
#include "tools/umount_ahead.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include "tools/mount_table.h"

namespace lazycache::cli {
namespace {

// The id of the topmost mount at `path`, or nullopt when nothing is mounted there.
std::optional<int> top_mount_id(const std::string& path) {
  std::optional<int> id;
  for (const MountEntry& e : read_mount_table()) {
    if (e.mountpoint == path) id = e.mount_id;  // the kernel lists a mount after what it covers
  }
  return id;
}

bool mount_listed(int mount_id) {
  for (const MountEntry& e : read_mount_table()) {
    if (e.mount_id == mount_id) return true;
  }
  return false;
}

}  // namespace

int umount_ahead_of_teardown(const std::string& path, int flags) {
  auto here = [&] { return ::umount2(path.c_str(), flags) == 0 ? 0 : errno; };
  const std::optional<int> id = top_mount_id(path);
  const int table = ::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
  int result_pipe[2];
  if (!id || table < 0 || ::pipe2(result_pipe, O_CLOEXEC) != 0) {
    if (table >= 0) ::close(table);
    return here();
  }
  // Only async-signal-safe calls between fork and _exit (this process may have threads).
  const pid_t child = ::fork();
  if (child == 0) {
    if (::fork() != 0) ::_exit(0);  // the grandchild runs on, adopted by init: no zombie here
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {  // nobody reading this command's output waits for the teardown
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    const int err = ::umount2(path.c_str(), flags) == 0 ? 0 : errno;
    (void)!::write(result_pipe[1], &err, sizeof err);
    ::_exit(0);
  }
  ::close(result_pipe[1]);
  if (child < 0) {
    ::close(result_pipe[0]);
    ::close(table);
    return here();
  }
  while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {}
  int result = -1;
  while (result < 0) {
    pollfd fds[2] = {{result_pipe[0], POLLIN, 0}, {table, POLLPRI, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) {
      int err = 0;
      result = ::read(result_pipe[0], &err, sizeof err) == static_cast<ssize_t>(sizeof err) ? err : EIO;
    } else if ((fds[1].revents & (POLLPRI | POLLERR)) != 0) {
      // The table changed (maybe another mount): reading it again re-arms the notification.
      if (!mount_listed(*id)) result = 0;
      (void)::lseek(table, 0, SEEK_SET);
      char drain[4096];
      while (::read(table, drain, sizeof drain) > 0) {}
    }
  }
  ::close(result_pipe[0]);
  ::close(table);
  return result < 0 ? EIO : result;
}

}  // namespace lazycache::cli
