// SPDX-License-Identifier: MIT
#include "tools/detached_remove.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "common/posix_files.h"

namespace lazycache::cli {

bool remove_tree_detached(const std::string& dir) {
  const size_t slash = dir.find_last_of('/');
  if (slash == std::string::npos || slash + 1 == dir.size()) return remove_tree(dir);
  const std::string doomed = dir.substr(0, slash + 1) + "." + dir.substr(slash + 1) + ".removing-" + std::to_string(::getpid());
  if (::rename(dir.c_str(), doomed.c_str()) != 0) return errno == ENOENT || remove_tree(dir);
  // Only async-signal-safe calls between fork and exec (this process may have threads).
  const char* argv[] = {"rm", "-rf", "--", doomed.c_str(), nullptr};
  const pid_t child = ::fork();
  if (child < 0) return remove_tree(doomed);
  if (child == 0) {
    if (::fork() != 0) ::_exit(0);  // the grandchild runs on, adopted by init
    ::setsid();
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    ::execv("/bin/rm", const_cast<char* const*>(argv));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {}
  return true;
}

}  // namespace lazycache::cli
