// SPDX-License-Identifier: MIT
// File: tools/store_check.h -- `doctor`'s store check: can this machine use the store the
// options name (the URL parses, credentials are found, the store answers, the bucket exists, the
// credentials are accepted)? One LIST of at most one key, two attempts.
#pragma once

#include <cstdint>
#include <string>

#include "tools/command.h"

namespace lazycache::cli {

struct StoreCheck {
  std::string store;  // the URL, redacted
  bool ok = false;
  std::string problem;  // what is wrong, in words ("the bucket does not exist"); "" when ok
  std::string detail;   // the error as the store reported it
  uint64_t ms = 0;      // how long the check took
};

StoreCheck check_store(const ArgParser& args);

// The words for a failed store call: what is most likely wrong, from its code and message.
std::string store_problem(const Status& error);

}  // namespace lazycache::cli
