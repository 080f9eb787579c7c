// SPDX-License-Identifier: MIT
// File: tools/cli_main.h -- `lazycache ARGS...` as a function: the dispatcher main.cpp calls, and
// what tests run in-process (parse + run + exit code, output on std::cout / std::cerr).
#pragma once

#include <string>
#include <vector>

namespace lazycache::cli {

struct CliMainOptions {
  // Process-wide effects a test must not cause: the Ctrl-C handlers (tools/interrupt.h) and
  // /etc/lazycache/config defaults written into the environment (tools/config_file.h).
  bool install_interrupt_handlers = true;
  bool apply_default_config = true;
};

// `args` without the program name: {"COMMAND", "--opt", ...}. Prints the usage for none (exit 2)
// or --help (0), the version for --version, else runs the registered command and returns its
// exit code (tools/command.h); an exception a command lets escape is reported and is exit 1.
int run_cli(const std::vector<std::string>& args, const CliMainOptions& options = {});

}  // namespace lazycache::cli
