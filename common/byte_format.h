// SPDX-License-Identifier: MIT
// File: common/byte_format.h -- the one way a byte count is written for people (messages,
// summaries, progress lines): every layer prints sizes alike, so a log reads one unit system.
#pragma once

#include <cstdint>
#include <string>

namespace lazycache {

// "0 B", "512 B", "1.0 KiB", "22.9 MiB", "2.3 GiB", "1.5 TiB": binary units, one decimal, whole
// bytes below 1 KiB (a tiny entry is "6 B", not "0.0 MiB"); the exact value is rounded to nearest,
// ties to even (printf's "%.1f": 1280 B is "1.2 KiB"). Pure; thread-safe. The GitHub Action's
// formatBytes follows the same rule: both are tested against tests/common/byte_format_cases.txt.
std::string human_bytes(uint64_t bytes);

}  // namespace lazycache
