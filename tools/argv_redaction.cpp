// SPDX-License-Identifier: MIT
#include "tools/argv_redaction.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "remote/store_url.h"

namespace lazycache::cli {

namespace {

// Overwrites the C string `s` with its redacted form, in its own bytes: /proc shows the
// process's original argument and environment blocks, so only an in-place write hides a
// secret there. The terminating NUL stays; a longer redacted form is cut to fit.
void redact_in_place(char* s) {
  const size_t length = std::strlen(s);
  const std::string redacted = remote::redact_url(s);
  if (redacted == s) return;
  const size_t n = redacted.size() < length ? redacted.size() : length;
  std::memcpy(s, redacted.data(), n);
  std::memset(s + n, 0, length - n);
}

}  // namespace

void redact_own_argv(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) redact_in_place(argv[i]);
}

void redact_own_store_env() {
  if (char* value = std::getenv("LAZYCACHE_STORE")) redact_in_place(value);
}

}  // namespace lazycache::cli
