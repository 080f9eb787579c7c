// SPDX-License-Identifier: MIT
#include "tools/process_exit.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

namespace lazycache::cli {

bool wait_for_process_exit(pid_t pid, std::chrono::milliseconds timeout, const std::function<bool()>& still_same) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0 && errno == ESRCH) return true;
  // Checked once the pidfd holds the process: a pid reused after this point is not ours.
  bool exited = !still_same();
  while (!exited && fd >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()) + 1);
    if (n > 0) exited = true;
    else if (n < 0 && errno != EINTR) break;  // fall back to checking below
  }
  if (fd >= 0) ::close(fd);
  while (!exited && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    exited = !still_same();
  }
  return exited || !still_same();
}

}  // namespace lazycache::cli
