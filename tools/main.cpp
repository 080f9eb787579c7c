// SPDX-License-Identifier: MIT
// The `lazycache` executable: everything is in the lc_cli library (tools/cli_main.h); main only
// prepares the process.
#include <string>
#include <vector>

#include "tools/argv_redaction.h"
#include "tools/cli_main.h"
#include "tools/standard_streams.h"

int main(int argc, char** argv) {
  lazycache::cli::open_closed_standard_streams();  // before any file takes descriptor 0, 1 or 2
  std::vector<std::string> args(argv + 1, argv + argc);
  lazycache::cli::redact_own_argv(argc, argv);  // `args` is the copy; ps shows no secret
  return lazycache::cli::run_cli(args);
}
