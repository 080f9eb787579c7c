// SPDX-License-Identifier: MIT
// File: tools/env_check.h -- a mistyped LAZYCACHE_* variable (LAZYCACHE_STOER=...) would
// otherwise be ignored silently and the job would use the default store: every command warns.
#pragma once

#include <string>
#include <vector>

namespace lazycache::cli {

// The LAZYCACHE_* variables lazycache (CLI and Action) reads. Add new ones here.
const std::vector<std::string>& known_environment_variables();

// One "lazycache: warning: ..." line on stderr per unknown LAZYCACHE_* variable in `environ`.
void warn_unknown_environment(char** environ_list);

}  // namespace lazycache::cli
