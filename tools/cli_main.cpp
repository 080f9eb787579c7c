// SPDX-License-Identifier: MIT
#include "tools/cli_main.h"

#include <unistd.h>

#include <iostream>
#include <new>

#include "tools/command.h"
#include "tools/config_file.h"
#include "tools/env_check.h"
#include "tools/interrupt.h"

namespace lazycache::cli {
namespace {

void print_usage() {
  std::cout << "usage: lazycache COMMAND [OPTIONS] [ARGS]\n\n"
               "A CI cache that mounts instead of restoring: seekable-zstd tar archives plus an\n"
               "index in object storage, mounted lazily through FUSE.\n\ncommands:\n";
  for (const auto& [name, info] : command_registry()) {
    std::cout << "  " << name << std::string(name.size() < 12 ? 12 - name.size() : 1, ' ') << info.summary << "\n";
  }
  std::cout << "\n'lazycache COMMAND --help' shows a command's options. 'lazycache --version' prints the version.\n";
}

}  // namespace

int run_cli(const std::vector<std::string>& args, const CliMainOptions& options) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_usage();
    return args.empty() ? kExitUsage : kExitOk;
  }
  const std::string& command = args[0];
  if (command == "--version" || command == "version") {
    std::cout << "lazycache " << LC_VERSION << "\n";
    return kExitOk;
  }
  // Machine-wide defaults (/etc/lazycache/config) fill what the environment leaves unset.
  if (options.apply_default_config) {
    if (Status s = apply_default_config(); !s.ok()) return report_error(command, s);
  }
  warn_unknown_environment(environ);  // after the config file: its names too
  auto it = command_registry().find(command);
  if (it == command_registry().end()) {
    std::cerr << "lazycache: unknown command '" << command << "' (see lazycache --help)\n";
    return kExitUsage;
  }
  if (options.install_interrupt_handlers) install_interrupt_handlers(command);  // Ctrl-C: one line, exit 130, at once
  ArgParser parser(command, it->second.usage, std::vector<std::string>(args.begin() + 1, args.end()));
  try {
    return it->second.run(parser);
  } catch (const std::bad_alloc&) {
    std::cerr << "lazycache " << command << ": out of memory\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "lazycache " << command << ": internal error: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace lazycache::cli
