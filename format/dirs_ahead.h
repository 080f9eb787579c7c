// SPDX-License-Identifier: MIT
// File: format/dirs_ahead.h -- DirsAhead: one thread that makes the directories of new (staged)
// extraction targets from the index while the first frames are still on their way.
//
// Why: in a staged target the extract's calling thread made every directory itself, on its walk
// to the first entry below it (format/dir_stack.h), between handing batches of files to the file
// writers: node's 2,884 mkdirat calls sat on the one thread that feeds the writers, and before the
// first frame arrived the CPU had nothing to do. This thread starts once the index is known and
// walks the directories in the same depth-first order, so it is mostly ahead of the writing walk;
// the walk skips the mkdirat of a directory made() says is there and makes any other itself
// (mkdirat's EEXIST is expected: the two may meet on one directory).
//
// Safety: only for staged targets, which this run created under a temporary name and nothing else
// writes into; every directory is made and opened relative to its parent's descriptor with
// O_NOFOLLOW | O_DIRECTORY (DirStack), and the thread is joined before any symlink or hardlink of
// the archive is created, so it can never meet a link.
// Each directory is made in its parent's descriptor at its final mode where the extractor can
// give it (Job::mode), so one with no subdirectories is never opened here.
// Descriptors: a DirStack of its own, so as many again as the write walk's (bounded in the depth).
// Best effort: the first failure stops the thread (the walk then meets the same failure and
// reports it with the entry's name). Thread-safe: made() from any thread; the destructor stops and
// joins.
#pragma once

#include <sys/types.h>
#include <atomic>

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "format/archive.h"

namespace lazycache::format {

class DirsAhead {
 public:
  struct Job {
    int base_fd = -1;           // the staged target's directory (borrowed: outlives the thread)
    EntryId top = 0;            // the entry that base_fd is
    std::vector<EntryId> dirs;  // directories below `top`, parents before children
    // The mode to make each with (DirStack::set_create_missing); called from the thread.
    std::function<mode_t(EntryId)> mode;
  };
  // Starts the thread. `index` must outlive it.
  DirsAhead(const Index& index, std::vector<Job> jobs);
  ~DirsAhead();
  DirsAhead(const DirsAhead&) = delete;
  DirsAhead& operator=(const DirsAhead&) = delete;

  // Whether directory `dir` of job `job` exists on disk already (made by this thread).
  bool made(size_t job, EntryId dir) const;
  // Stops after the directory in progress and joins.
  void stop();
  // Directories it made, or found made by the walk first (after stop(): final).
  uint64_t made_count() const { return made_count_.load(); }

 private:
  void run();

  const Index& index_;
  const std::vector<Job> jobs_;
  std::vector<std::unique_ptr<std::atomic<bool>[]>> made_;  // per job, by entry id
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> made_count_{0};
  std::jthread thread_;  // last: joined first on destruction
};

}  // namespace lazycache::format
