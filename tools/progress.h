// SPDX-License-Identifier: MIT
// File: tools/progress.h -- a one-line progress display for long commands. Draws only when
// stderr is a terminal (and not with --quiet), at most 10 times a second; CI logs stay clean.
// Single-threaded: call from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace lazycache::cli {

class Progress {
 public:
  Progress(std::string label, bool quiet);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // "LABEL  files 12/340  bytes 3.1 MiB/20.0 MiB  (extra)"
  void update(uint64_t files_done, uint64_t files_total, uint64_t bytes_done, uint64_t bytes_total, const std::string& extra = "");
  void finish();  // clears the line
  bool enabled() const { return enabled_; }

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// "1.5 MiB", "312 B".
std::string human_bytes(uint64_t bytes);

}  // namespace lazycache::cli
