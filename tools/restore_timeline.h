// SPDX-License-Identifier: MIT
// File: tools/restore_timeline.h -- RestoreTimeline: when each step of `restore --extract` ended,
// in ms since the command started, for `--verbose` (one line on stderr) and `--json` ("timeline").
//
// Why: a full restore is a chain (entry lookup, the archive's tail, the frame data, the files, the
// release of the store connections) and its total alone does not say which gap to close. The
// steps, in order (docs/cli.md):
//   lookup      the entry is resolved (its HEAD or listing answered: its size is known)
//   tail        seek table and index read (the first wave of data was already asked for)
//   first_data  the first frame of data is in and checked
//   last_data   the last part is in and checked (the download's end)
//   extract     every file, link and directory is in place (the tree renamed into place)
//   released    the reader, the archive's connections and buffers are freed; after this only the
//               process's own exit is left (measured from outside: docs/stores.md)
// A step that did not happen (no frame data) is left out. Not thread-safe; one per command.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lazycache::cli {

class RestoreTimeline {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RestoreTimeline(Clock::time_point start = Clock::now()) : start_(start) {}
  // Records step `name` at `at`; a time point of the clock's epoch (never set) is ignored.
  void mark(std::string_view name, Clock::time_point at = Clock::now());
  // "lookup 12 ms, tail 45 ms, ..." in the order marked.
  std::string text() const;
  // {"lookup_ms":12,"tail_ms":45,...}
  std::string json() const;

 private:
  Clock::time_point start_;
  std::vector<std::pair<std::string, uint64_t>> steps_;  // name, ms since start_
};

}  // namespace lazycache::cli
