// SPDX-License-Identifier: MIT
// File: common/byte_source.h -- ByteSource, the random-access read interface that format/ reads
// archives through. format/ never knows whether the bytes come from a local file or a store:
// tools/ adapts an ObjectStore entry (remote/object_byte_source.h) or a local file to this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"

namespace lazycache {

// Told during a read how many bytes from the start of its buffer are in: `filled` only grows, and
// the read writes no byte below it again. Called on the thread that called read_at_streaming (for
// a remote source, from inside the transfer: keep it short). The bytes are what the source sent, no more checked
// than any read's: a caller checks them (format/ checks every frame's digest) before use.
using ReadProgress = std::function<void(size_t filled)>;

struct ReadRequest {
  uint64_t offset = 0;
  std::span<std::byte> out;  // filled from offset; request length = out.size()
  size_t bytes_read = 0;     // set by read_ranges
};

// Contract:
//  - Thread-safe: any number of threads may call read_at/read_ranges concurrently.
//  - Blocking.
//  - read_at returns the number of bytes read; it is short only at the end of the object.
//    Bytes of `out` past the returned count are left unspecified.
//  - Errors: kNotFound, kUnavailable (after the source's own retries), kPreconditionFailed
//    (the underlying object changed since open), kCorrupt, kIo.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  virtual Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const = 0;
  // read_at, telling `progress` as the bytes arrive, so that a caller can use the first ones
  // before the last came in (restore decodes a range read's frames as each is in). The default
  // reads, then tells the count once; a remote source tells as its reply's body comes. After an
  // error, what was told is still there (checked by the caller like any bytes).
  virtual Result<size_t> read_at_streaming(uint64_t offset, std::span<std::byte> out, const ReadProgress& progress) const;
  // Ends every read in flight as soon as the source can (a remote one: its transfer stops at the
  // next bytes or within a second while it waits) and fails it, and every later read, with
  // kCancelled, never retried. For a process about to exit that must not wait for transfers
  // nobody wants any more (a mount's fill at unmount). Irreversible; the default does nothing
  // (local reads end soon enough).
  virtual void cancel() const {}
  // Many reads at once; remote sources override to run them concurrently.
  // The default loops over read_at. Stops at the first error.
  virtual Status read_ranges(std::span<ReadRequest> requests) const;
  // For messages: "file /x/a.tar.zst" or "s3://bucket/key".
  virtual std::string describe() const = 0;
};

// A ByteSource over a local file, read with pread (one fd, shared by all threads).
class LocalFileSource final : public ByteSource {
 public:
  // Errors: kNotFound, kPermissionDenied, kIo.
  static Result<std::unique_ptr<LocalFileSource>> open(const std::string& path);
  ~LocalFileSource() override;
  LocalFileSource(const LocalFileSource&) = delete;
  LocalFileSource& operator=(const LocalFileSource&) = delete;

  uint64_t size() const override { return size_; }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override;
  std::string describe() const override { return "file " + path_; }

 private:
  LocalFileSource(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  int fd_;
  uint64_t size_;
  std::string path_;
};

// A ByteSource over bytes held in memory (tests, and index bytes already fetched).
class MemorySource final : public ByteSource {
 public:
  explicit MemorySource(std::string bytes, std::string name = "memory") : bytes_(std::move(bytes)), name_(std::move(name)) {}
  uint64_t size() const override { return bytes_.size(); }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override;
  std::string describe() const override { return name_; }

 private:
  std::string bytes_;
  std::string name_;
};

}  // namespace lazycache
