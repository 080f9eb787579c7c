// SPDX-License-Identifier: MIT
// File: common/byte_sink.h -- ByteSink, where format/ writes archives to: a local file (written
// to a temporary name and renamed on commit) or, in tools/, a streaming upload to a store.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"

namespace lazycache {

// Contract: single writer (not thread-safe); write() blocks until the bytes are accepted
// (a streaming upload applies backpressure here). Nothing is visible under the final name
// until commit() succeeds; destroying an uncommitted sink discards what was written.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Status write(std::span<const std::byte> bytes) = 0;
  virtual Status commit() = 0;
  virtual uint64_t bytes_written() const = 0;
};

// Writes PATH.tmp.<pid>.<n> and renames it over PATH on commit (after fsync).
class LocalFileSink final : public ByteSink {
 public:
  // Errors: kIo, kPermissionDenied, kNotFound (missing directory).
  static Result<std::unique_ptr<LocalFileSink>> create(const std::string& path);
  ~LocalFileSink() override;
  LocalFileSink(const LocalFileSink&) = delete;
  LocalFileSink& operator=(const LocalFileSink&) = delete;
  Status write(std::span<const std::byte> bytes) override;
  Status commit() override;
  uint64_t bytes_written() const override { return written_; }

 private:
  LocalFileSink(int fd, std::string path, std::string tmp) : fd_(fd), path_(std::move(path)), tmp_(std::move(tmp)) {}
  int fd_;
  std::string path_, tmp_;
  uint64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace lazycache
