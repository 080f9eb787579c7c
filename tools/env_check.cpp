// SPDX-License-Identifier: MIT
#include "tools/env_check.h"

#include <algorithm>
#include <iostream>
#include <string_view>

namespace lazycache::cli {

const std::vector<std::string>& known_environment_variables() {
  static const std::vector<std::string> known = {
      "LAZYCACHE_STORE",
      "LAZYCACHE_CACHE_DIR",
      "LAZYCACHE_RUN_DIR",
      "LAZYCACHE_CONFIG",
      "LAZYCACHE_BIN",
      "LAZYCACHE_PROGRESS_INTERVAL",
      "LAZYCACHE_STORE_COPY",
      "LAZYCACHE_STORE_MAX_SIZE",
      "LAZYCACHE_SAVE_CROSSCHECK",
  };
  return known;
}

void warn_unknown_environment(char** environ_list) {
  const auto& known = known_environment_variables();
  for (char** e = environ_list; e && *e; ++e) {
    std::string_view entry(*e);
    if (entry.rfind("LAZYCACHE_", 0) != 0) continue;
    std::string name(entry.substr(0, entry.find('=')));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::cerr << "lazycache: warning: unknown environment variable " << name << " is ignored (known: ";
    for (size_t i = 0; i < known.size(); ++i) std::cerr << (i ? ", " : "") << known[i];
    std::cerr << ")\n";
  }
}

}  // namespace lazycache::cli
