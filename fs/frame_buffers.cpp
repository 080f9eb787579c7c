// SPDX-License-Identifier: MIT
#include "fs/frame_buffers.h"

#include <zstd.h>

#include <mutex>
#include <string>
#include <vector>

#include "format/hashing.h"
#include "fs/frame_bytes.h"

namespace lazycache::fs {

struct FrameBuffers::Pool {
  std::mutex mu;  // guards free, kept, reused
  std::vector<std::unique_ptr<FrameBytes>> free;
  uint64_t kept = 0;  // capacity of `free`
  uint64_t reused = 0;
  size_t max_kept = 0;
  uint64_t max_buffer_bytes = 0;

  // A buffer of size n: a free one with room (its old bytes stay until overwritten), else new.
  std::unique_ptr<FrameBytes> take(size_t n) {
    std::unique_ptr<FrameBytes> buf;
    {
      std::lock_guard lock(mu);
      for (auto it = free.begin(); it != free.end(); ++it) {
        if ((*it)->capacity() < n) continue;
        buf = std::move(*it);
        free.erase(it);
        kept -= buf->capacity();
        ++reused;
        break;
      }
    }
    if (buf == nullptr) {
      buf = std::make_unique<FrameBytes>();
      buf->reserve(n + n / 4);
    }
    buf->resize(n);  // writes nothing: the decoder writes every byte
    return buf;
  }

  void give_back(FrameBytes* buf) {
    std::unique_ptr<FrameBytes> owned(buf);
    std::lock_guard lock(mu);
    if (free.size() >= max_kept || owned->capacity() > max_buffer_bytes) return;
    kept += owned->capacity();
    free.push_back(std::move(owned));
  }
};

FrameBuffers::FrameBuffers(size_t max_kept, uint64_t max_buffer_bytes) : pool_(std::make_shared<Pool>()) {
  pool_->max_kept = max_kept;
  pool_->max_buffer_bytes = max_buffer_bytes;
}

namespace {
struct DCtxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};
}  // namespace

Result<FramePtr> FrameBuffers::decode(const format::FrameInfo& info, uint32_t number, std::span<const std::byte> compressed) {
  auto corrupt = [number](const std::string& what) { return Status(ErrorCode::kCorrupt, "frame " + std::to_string(number) + ": " + what); };
  if (compressed.size() != info.compressed_size) {
    return corrupt("got " + std::to_string(compressed.size()) + " compressed bytes, the index says " +
                   std::to_string(info.compressed_size));
  }
  if (format::xxh3_128(compressed) != info.digest) return corrupt("compressed bytes do not match their XXH3-128 digest");
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
  if (!dctx) return Status(ErrorCode::kInternal, "ZSTD_createDCtx failed");
  std::unique_ptr<FrameBytes> buf = pool_->take(static_cast<size_t>(info.uncompressed_size));
  // The buffer is exactly the frame's size: zstd fails on a frame that would decode to more.
  const size_t n = ZSTD_decompressDCtx(dctx.get(), buf->data(), buf->size(), compressed.data(), compressed.size());
  Status failed;
  if (ZSTD_isError(n)) {
    failed = corrupt(std::string("zstd: ") + ZSTD_getErrorName(n));
  } else if (n != buf->size()) {
    failed = corrupt("decompressed to " + std::to_string(n) + " bytes, the seek table says " + std::to_string(buf->size()));
  } else if (format::xxh64_low32(std::as_bytes(std::span<const char>(buf->data(), buf->size()))) != info.xxh64_low32) {
    failed = corrupt("seek-table checksum mismatch");
  }
  if (!failed.ok()) {
    pool_->give_back(buf.release());
    return failed;
  }
  return FramePtr(buf.release(), [pool = pool_](const FrameBytes* b) { pool->give_back(const_cast<FrameBytes*>(b)); });
}

uint64_t FrameBuffers::trim() {
  std::vector<std::unique_ptr<FrameBytes>> gone;
  std::lock_guard lock(pool_->mu);
  gone.swap(pool_->free);
  const uint64_t freed = pool_->kept;
  pool_->kept = 0;
  return freed;
}

uint64_t FrameBuffers::kept_bytes() const {
  std::lock_guard lock(pool_->mu);
  return pool_->kept;
}

uint64_t FrameBuffers::reused() const {
  std::lock_guard lock(pool_->mu);
  return pool_->reused;
}

}  // namespace lazycache::fs
