// SPDX-License-Identifier: MIT
#include "fs/hand_off_thread.h"

namespace lazycache::fs {

HandOffThread::HandOffThread(uint64_t max_bytes) : max_bytes_(max_bytes), thread_([this](std::stop_token st) { loop(st); }) {}

HandOffThread::~HandOffThread() { stop(); }

void HandOffThread::stop() {
  thread_.request_stop();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool HandOffThread::push(uint64_t bytes, std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    if (queued_bytes_ + bytes > max_bytes_) return false;
    queued_bytes_ += bytes;
    queue_.emplace_back(bytes, std::move(job));
  }
  cv_.notify_one();
  return true;
}

void HandOffThread::wait_idle() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [this] { return (queue_.empty() && !running_) || thread_.get_stop_token().stop_requested(); });
}

void HandOffThread::loop(std::stop_token stop) {
  while (true) {
    std::pair<uint64_t, std::function<void()>> job;
    {
      std::unique_lock lock(mu_);
      // A job queued when stop came is dropped like the rest (wait returns true for it).
      if (!cv_.wait(lock, stop, [this] { return !queue_.empty(); }) || stop.stop_requested()) break;
      job = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    job.second();
    job.second = nullptr;  // what it held goes before the bytes are counted out
    {
      std::lock_guard lock(mu_);
      queued_bytes_ -= job.first;
      running_ = false;
    }
    idle_cv_.notify_all();
  }
  std::lock_guard lock(mu_);
  queue_.clear();
  queued_bytes_ = 0;
  idle_cv_.notify_all();
}

}  // namespace lazycache::fs
