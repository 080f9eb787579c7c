// SPDX-License-Identifier: MIT
#include "tools/interrupt.h"

#include <unistd.h>

#include <cstring>

namespace lazycache::cli {
namespace {

// Prebuilt at install time: the handler may only call async-signal-safe functions (write, _exit).
char g_interrupt_line[2][160];
size_t g_interrupt_len[2];

void on_interrupt(int signo) {
  const int i = signo == SIGINT ? 0 : 1;
  ssize_t ignored = ::write(STDERR_FILENO, g_interrupt_line[i], g_interrupt_len[i]);
  (void)ignored;
  ::_exit(interrupted_exit_code(signo));
}

}  // namespace

std::string signal_name(int signo) {
  switch (signo) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(signo);
  }
}

void install_interrupt_handlers(const std::string& command) {
  const int signals[2] = {SIGINT, SIGTERM};
  for (int i = 0; i < 2; ++i) {
    std::string line = "\nlazycache " + command.substr(0, 40) + ": interrupted by " + signal_name(signals[i]) + "; stopping\n";
    std::memcpy(g_interrupt_line[i], line.data(), line.size());
    g_interrupt_len[i] = line.size();
    struct sigaction old {};
    ::sigaction(signals[i], nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;  // ignored by whoever started us (nohup-style): keep it so
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    ::sigaction(signals[i], &sa, nullptr);
  }
}

}  // namespace lazycache::cli
