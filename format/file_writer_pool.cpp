// SPDX-License-Identifier: MIT
#include "format/file_writer_pool.h"

#include <algorithm>

namespace lazycache::format {

FileWriterPool::FileWriterPool(int threads, uint64_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { work(); });
}

FileWriterPool::~FileWriterPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    queue_.clear();
    frame_refs_.clear();
    work_cv_.notify_all();
    idle_cv_.notify_all();
  }
  threads_.clear();  // joins
}

Status FileWriterPool::submit(Frame frame, Job job) {
  std::unique_lock lock(mu_);
  const bool known = !frame || frame_refs_.count(frame.get()) > 0;
  const uint64_t more = known ? 0 : frame->size();
  idle_cv_.wait(lock, [&] { return !error_.ok() || stopping_ || frame_refs_.empty() || known || frame_bytes_ + more <= max_frame_bytes_; });
  if (!error_.ok()) return error_;
  if (stopping_) return Status(ErrorCode::kCancelled, "file writers stopped");
  if (frame) {
    if (frame_refs_[frame.get()]++ == 0) frame_bytes_ += frame->size();
  }
  queue_.push_back(Queued{std::move(frame), std::move(job)});
  work_cv_.notify_one();
  return Status();
}

void FileWriterPool::release(const Frame& frame) {
  if (!frame) return;
  auto it = frame_refs_.find(frame.get());
  if (it == frame_refs_.end()) return;  // dropped by cancel()
  if (--it->second == 0) {
    frame_bytes_ -= frame->size();
    frame_refs_.erase(it);
  }
}

Status FileWriterPool::finish() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return (queue_.empty() && running_ == 0) || stopping_; });
  if (!error_.ok()) return error_;
  if (stopping_) return Status(ErrorCode::kCancelled, "file writers stopped");
  return Status();
}

void FileWriterPool::cancel() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  for (const auto& q : queue_) release(q.frame);
  queue_.clear();
  work_cv_.notify_all();
  idle_cv_.notify_all();
}

void FileWriterPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping
    Queued q = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    Status s = q.job();
    lock.lock();
    --running_;
    release(q.frame);
    if (!s.ok() && error_.ok()) {
      error_ = std::move(s);
      // Nothing queued after a failure runs: the extract is failing and will roll back.
      for (const auto& r : queue_) release(r.frame);
      queue_.clear();
    }
    idle_cv_.notify_one();  // one submitting thread
  }
}

}  // namespace lazycache::format
