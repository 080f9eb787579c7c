// SPDX-License-Identifier: MIT
// File: fs/hand_off_thread.h -- HandOffThread: page-cache hand-offs that may wait for the kernel,
// run off the fetch threads, in order, within a bound.
//
// Why: a notify_store waits for every page it fills that the kernel has locked, and the kernel
// locks the pages of a READ until the daemon answers it. A file wholly inside one frame is handed
// off after the READs waiting on that frame were answered, so nothing is locked for it; but a
// READ of a file that spans frames may wait for the next frame of the same range read, fetched
// by the very thread that would block in the store of the first frame's part (seen: the large
// fixture's job over the far link, a READ timed out after 30 s with EIO). Here the store waits
// on its own thread while the fetch threads go on and answer the READ.
// Memory: each job holds what it hands off (a decoded frame); past `max_bytes` of them queued, a
// job is refused (the file's READs serve those pages instead).
// Thread-safe. stop() (and the destructor) drops the jobs not started and joins the thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>
#include <utility>

namespace lazycache::fs {

class HandOffThread {
 public:
  explicit HandOffThread(uint64_t max_bytes);
  ~HandOffThread();
  HandOffThread(const HandOffThread&) = delete;
  HandOffThread& operator=(const HandOffThread&) = delete;

  // Queues `job`, which holds `bytes` until it has run; false (and `job` dropped) past the bound.
  bool push(uint64_t bytes, std::function<void()> job);
  // Blocks until every job queued so far has run (tests, and the figures' consistency).
  void wait_idle();
  // Runs no job after the one running (waited for); later pushes are queued and dropped unrun.
  // Idempotent; the destructor calls it.
  void stop();

 private:
  void loop(std::stop_token stop);

  const uint64_t max_bytes_;
  std::mutex mu_;  // guards queue_, queued_bytes_, running_
  std::condition_variable_any cv_;
  std::condition_variable idle_cv_;
  std::deque<std::pair<uint64_t, std::function<void()>>> queue_;
  uint64_t queued_bytes_ = 0;  // of the jobs queued or running
  bool running_ = false;
  std::jthread thread_;  // last: started after the members it uses
};

}  // namespace lazycache::fs
