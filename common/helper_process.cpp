// SPDX-License-Identifier: MIT
#include "common/helper_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/posix_files.h"

namespace lazycache {
namespace {

std::vector<std::string> helper_environment(const char* request_variable) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view var(*e);
    const std::string_view name = var.substr(0, var.find('='));
    if (name.ends_with("SAN_OPTIONS") || name == "LD_LIBRARY_PATH") env.emplace_back(var);
  }
  env.push_back(std::string(request_variable) + "=" + std::to_string(::getpid()));
  return env;
}

}  // namespace

pid_t spawn_helper(const char* request_variable, const char* argv0, int socket, int pass_fd) {
  // dup2 onto its own number would keep FD_CLOEXEC: the passed descriptor goes through a copy
  // above the child's fixed ones first (closed here after the spawn).
  UniqueFd passed;
  if (pass_fd >= 0) {
    passed = UniqueFd(::fcntl(pass_fd, F_DUPFD_CLOEXEC, kHelperPassedFd + 1));
    if (!passed.valid()) return -1;
  }
  posix_spawn_file_actions_t actions;
  if (::posix_spawn_file_actions_init(&actions) != 0) return -1;
  ::posix_spawn_file_actions_adddup2(&actions, socket, STDIN_FILENO);
  ::posix_spawn_file_actions_adddup2(&actions, socket, STDOUT_FILENO);
  ::posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  if (passed.valid()) ::posix_spawn_file_actions_adddup2(&actions, passed.get(), kHelperPassedFd);
  ::posix_spawn_file_actions_addclosefrom_np(&actions, passed.valid() ? kHelperPassedFd + 1 : STDERR_FILENO + 1);
  // The daemon blocks its stop signals in every thread (tools/mount_daemon.cpp); a helper needs
  // none of that: default handling, nothing blocked.
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGUSR1, SIGUSR2, SIGCHLD}) sigaddset(&defaults, sig);
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) sigaddset(&defaults, sig);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &defaults);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> env = helper_environment(request_variable);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string arg0 = argv0;
  char* argv[] = {arg0.data(), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, "/proc/self/exe", &actions, &attr, argv, envp.data());
  ::posix_spawnattr_destroy(&attr);
  ::posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

bool become_helper(const char* request_variable, const char* name, int exit_code_if_orphaned) {
  const char* parent = std::getenv(request_variable);
  if (parent == nullptr) return false;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::prctl(PR_SET_NAME, name);
  if (std::to_string(::getppid()) != parent) ::_exit(exit_code_if_orphaned);
  return true;
}

}  // namespace lazycache
