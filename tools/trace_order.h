// SPDX-License-Identifier: MIT
// File: tools/trace_order.h -- the order of first reads that `lazycache trace` records: pure
// policy (no fanotify, no threads), fed one event at a time by tools/fanotify_tracer.cpp.
//
// A file takes its place in the list at its first read. A file the job writes (npm ci unpacking,
// a build writing its outputs) loses its place when it is closed after writing and takes a new
// one at its next read, so written files are ordered by their first read after being written,
// and files only written are not listed. The kernel merges queued events of one process on one
// file, so an event may carry several of the flags below; note() reads them as "opened, then
// closed for writing, then closed read-only", the order in which a job writes and reads back.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

namespace lazycache::cli {

struct FileEvent {
  bool opened = false;          // FAN_OPEN: for reading or writing, the kernel does not say
  bool closed_written = false;  // FAN_CLOSE_WRITE: it had been opened for writing
  bool closed_read = false;     // FAN_CLOSE_NOWRITE: it had been opened read-only
};

class TraceOrder {
 public:
  void note(const std::string& path, const FileEvent& e);
  // The listed files, first read first.
  std::vector<std::string> list() const;
  size_t size() const { return place_.size(); }

 private:
  std::vector<std::string> order_;                 // by first read; forgotten ones are empty
  std::unordered_map<std::string, size_t> place_;  // path -> index in order_
};

}  // namespace lazycache::cli
