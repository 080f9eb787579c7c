// SPDX-License-Identifier: MIT
// The `lazycache` executable: dispatch to a registered command; the one top-level catch-all.
#include <unistd.h>

#include <iostream>
#include <new>

#include "tools/argv_redaction.h"
#include "tools/command.h"
#include "tools/config_file.h"
#include "tools/env_check.h"
#include "tools/interrupt.h"
#include "tools/standard_streams.h"

using lazycache::cli::command_registry;

static void print_usage() {
  std::cout << "usage: lazycache COMMAND [OPTIONS] [ARGS]\n\n"
               "A CI cache that mounts instead of restoring: seekable-zstd tar archives plus an\n"
               "index in object storage, mounted lazily through FUSE.\n\ncommands:\n";
  for (const auto& [name, info] : command_registry()) {
    std::cout << "  " << name << std::string(name.size() < 12 ? 12 - name.size() : 1, ' ') << info.summary << "\n";
  }
  std::cout << "\n'lazycache COMMAND --help' shows a command's options. 'lazycache --version' prints the version.\n";
}

int main(int argc, char** argv) {
  lazycache::cli::open_closed_standard_streams();  // before any file takes descriptor 0, 1 or 2
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" || std::string(argv[1]) == "help") {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  if (command == "--version" || command == "version") {
    std::cout << "lazycache " << LC_VERSION << "\n";
    return 0;
  }
  // Machine-wide defaults (/etc/lazycache/config) fill what the environment leaves unset.
  if (lazycache::Status s = lazycache::cli::apply_default_config(); !s.ok()) {
    return lazycache::cli::report_error(command, s);
  }
  lazycache::cli::warn_unknown_environment(environ);  // after the config file: its names too
  auto it = command_registry().find(command);
  if (it == command_registry().end()) {
    std::cerr << "lazycache: unknown command '" << command << "' (see lazycache --help)\n";
    return 2;
  }
  lazycache::cli::install_interrupt_handlers(command);  // Ctrl-C: one line, exit 130, at once
  lazycache::cli::ArgParser parser(command, it->second.usage, std::vector<std::string>(argv + 2, argv + argc));
  lazycache::cli::redact_own_argv(argc, argv);  // the parser has its copy; ps shows no secret
  try {
    return it->second.run(parser);
  } catch (const std::bad_alloc&) {
    std::cerr << "lazycache " << command << ": out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "lazycache " << command << ": internal error: " << e.what() << "\n";
    return 1;
  }
}
