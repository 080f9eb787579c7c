// SPDX-License-Identifier: MIT
// File: remote/upload_sink.h -- UploadSink: a ByteSink whose bytes become one store object,
// streamed: write() hands bytes to a background put() (a multipart upload on S3) through a
// bounded pipe, so `save` compresses and uploads at the same time with bounded memory (the pipe
// plus the upload's concurrency + 1 parts) and never needs a temp copy of the archive.
//
// commit() ends the body and waits for the upload: the object becomes visible only then (a
// multipart upload is completed, a local file renamed). Destroying an uncommitted sink makes the
// body fail, so the upload is aborted and nothing is published.
// Single writer (ByteSink contract); write() blocks while the pipe is full (backpressure) and
// returns the upload's error as soon as the upload has failed.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/byte_sink.h"
#include "remote/object_store.h"

namespace lazycache::remote {

class UploadSink final : public ByteSink {
 public:
  // Starts the upload thread. pipe_bytes: bytes buffered between writer and upload (8 MiB keeps
  // the compressor running while a part is handed over).
  UploadSink(std::shared_ptr<ObjectStore> store, std::string key, PutOptions options, size_t pipe_bytes = 8 << 20);
  ~UploadSink() override;
  UploadSink(const UploadSink&) = delete;
  UploadSink& operator=(const UploadSink&) = delete;

  Status write(std::span<const std::byte> bytes) override;
  // Errors: the store's put() errors (kAlreadyExists for a create-only key that exists).
  Status commit() override;
  uint64_t bytes_written() const override { return written_; }
  // After a successful commit(): the published object.
  const std::optional<ObjectInfo>& published() const { return published_; }

 private:
  Result<size_t> read_body(std::span<std::byte> out);  // the upload thread's BodyReader
  void finish();                                       // joins the upload thread

  std::shared_ptr<ObjectStore> store_;
  std::string key_;
  size_t pipe_bytes_;
  std::mutex mu_;  // guards the fields down to upload_status_
  std::condition_variable cv_;
  std::deque<std::vector<std::byte>> chunks_;
  size_t front_offset_ = 0;  // bytes of chunks_.front() already consumed
  size_t buffered_ = 0;
  bool closed_ = false;     // commit(): no more bytes
  bool abandoned_ = false;  // destroyed uncommitted: fail the body
  bool upload_done_ = false;
  Status upload_status_;
  std::optional<ObjectInfo> published_;
  uint64_t written_ = 0;
  bool committed_ = false;
  std::thread uploader_;
};

}  // namespace lazycache::remote
