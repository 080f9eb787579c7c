// SPDX-License-Identifier: MIT
// File: format/file_writer_pool.h -- FileWriterPool: worker threads that each write whole files
// for extract_archive() (create, write, metadata, close), fed in tar-stream order by the thread
// that takes the decoded frames.
//
// Why: on a tree of many small files the single writer thread was the bound of a full restore:
// 47 % of its samples were in openat -> ext4_create (inode allocation), and after a page-cache
// drop it also waits for inode-table blocks. Several writers spread that work over the cores and
// overlap those waits; files in different directories do not even share the directory's lock.
//
// A job names the decoded frame it reads (a shared buffer): the pool holds at most
// `max_frame_bytes` of distinct frames in its queue and in the running jobs (one frame is always
// let in, so a frame larger than the bound still goes). submit() blocks above that, so memory
// stays bounded however the files fall in the frames. The first failing job's Status is kept;
// after it, submit() and finish() return it and queued jobs are dropped unrun.
// Thread-safe for one submitting thread; the destructor drops the queue and joins.
#pragma once

#include "common/byte_buffer.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace lazycache::format {

class FileWriterPool {
 public:
  using Frame = std::shared_ptr<const ByteBuffer>;
  using Job = std::function<Status()>;

  FileWriterPool(int threads, uint64_t max_frame_bytes);
  ~FileWriterPool();
  FileWriterPool(const FileWriterPool&) = delete;
  FileWriterPool& operator=(const FileWriterPool&) = delete;

  // Queues `job`, which reads `frame` (may be null: an empty file). Blocks while the frames held
  // would exceed the bound. Returns the first job error instead once a job has failed.
  Status submit(Frame frame, Job job);
  // Waits until every submitted job has run; the first job error, if any.
  Status finish();
  // Stops: queued jobs are dropped (running ones finish), later submits fail with kCancelled.
  void cancel();

 private:
  struct Queued {
    Frame frame;
    Job job;
  };
  void work();
  void release(const Frame& frame);  // guarded by mu_ (called with it held)

  const uint64_t max_frame_bytes_;
  std::mutex mu_;  // the pool's only lock; guards everything below
  // Two conditions, so that a submit wakes one idle writer (not all of them) and a finished job
  // wakes only the submitting thread (waiting in submit() for the bound, or in finish()).
  std::condition_variable work_cv_;  // writers: a job queued, or stopping
  std::condition_variable idle_cv_;  // the submitter: a job done, an error, or stopping
  std::deque<Queued> queue_;
  std::unordered_map<const ByteBuffer*, size_t> frame_refs_;  // frame -> queued + running jobs
  uint64_t frame_bytes_ = 0;                                  // bytes of the frames in frame_refs_
  size_t running_ = 0;
  bool stopping_ = false;
  Status error_;
  std::vector<std::jthread> threads_;  // last: joined first on destruction
};

}  // namespace lazycache::format
