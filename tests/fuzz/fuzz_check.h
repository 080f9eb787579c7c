// SPDX-License-Identifier: MIT
// File: tests/fuzz/fuzz_check.h -- what every fuzz target asserts about untrusted input: it is
// refused with kCorrupt or kUnsupported (never another code, never a crash), or accepted and
// then safe to use. A violated rule aborts, so libFuzzer (and the corpus replay) report it.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "common/status.h"

namespace lazycache::fuzz {

[[noreturn]] inline void fail(const char* what, const Status& s) {
  std::fprintf(stderr, "fuzz rule broken: %s: %s\n", what, s.to_string().c_str());
  std::abort();
}

// Untrusted bytes may only be refused as corrupt or unsupported.
inline void check_refusal(const char* what, const Status& s) {
  if (s.code() != ErrorCode::kCorrupt && s.code() != ErrorCode::kUnsupported) fail(what, s);
}

}  // namespace lazycache::fuzz
