// SPDX-License-Identifier: MIT
// File: tools/progress.h -- progress of long commands (pack, save, extract, restore --extract,
// unmount --save, verify), one reporter for all of them. On a terminal: a bar redrawn in place
// at most 10 times a second. Elsewhere (a CI log): one line every few seconds, like
// actions/cache's "Received X of Y":
//   lazycache save: 48.0 MiB of 120.0 MiB (40%), 12.3 MiB/s, ETA 6 s; files 1200/3000; out 20.1 MiB
// The interval is 5 s, or $LAZYCACHE_PROGRESS_INTERVAL seconds (tests use 0.2; 0 turns the lines
// off). --quiet turns both off. Single-threaded: call from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/byte_format.h"

namespace lazycache::cli {

class Progress {
 public:
  Progress(std::string label, bool quiet);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(uint64_t files_done, uint64_t files_total, uint64_t bytes_done, uint64_t bytes_total, const std::string& extra = "");
  void finish();  // clears the bar (a log keeps its lines)
  bool enabled() const { return mode_ != Mode::kOff; }

 private:
  enum class Mode { kOff, kBar, kLines };
  std::string label_;
  Mode mode_;
  std::chrono::steady_clock::duration interval_;  // between log lines
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
};

// One progress line (pure, for tests): "LABEL: 48.0 MiB of 120.0 MiB (40%), 12.3 MiB/s, ETA 6 s;
// files 1200/3000; EXTRA". Without a total: "LABEL: 48.0 MiB, 12.3 MiB/s; ...".
std::string progress_line(const std::string& label, uint64_t files_done, uint64_t files_total, uint64_t bytes_done, uint64_t bytes_total,
                          double elapsed_seconds, const std::string& extra);

// Sizes in these lines: human_bytes() (common/byte_format.h), the one byte formatter.

}  // namespace lazycache::cli
