// SPDX-License-Identifier: MIT
#include "format/frame_codec.h"

#include <zstd.h>

#include <memory>

#include "format/hashing.h"
#include "format/le.h"
#include "format/seek_table.h"

namespace lazycache::format {

namespace {
struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};
}  // namespace

Result<std::string> compress_frame(std::span<const std::byte> data, int level) {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxDeleter> cctx(ZSTD_createCCtx());
  if (!cctx) return Status(ErrorCode::kInternal, "ZSTD_createCCtx failed");
  ZSTD_CCtx_reset(cctx.get(), ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_contentSizeFlag, 1);
  // Compress into an uninitialised scratch buffer kept per thread, then copy out the few
  // compressed bytes: zero-filling and faulting in a fresh bound-sized string per frame cost
  // more than the copy.
  thread_local std::unique_ptr<char[]> scratch;
  thread_local size_t scratch_size = 0;
  size_t bound = ZSTD_compressBound(data.size());
  if (scratch_size < bound) {
    scratch.reset(new char[bound]);
    scratch_size = bound;
  }
  size_t n = ZSTD_compress2(cctx.get(), scratch.get(), bound, data.data(), data.size());
  if (ZSTD_isError(n)) return Status(ErrorCode::kInternal, std::string("zstd compression failed: ") + ZSTD_getErrorName(n));
  return std::string(scratch.get(), n);
}

Result<std::string> decode_frame_checked(const FrameInfo& frame, uint32_t frame_number, std::span<const std::byte> compressed) {
  auto corrupt = [&](const std::string& what) {
    return Status(ErrorCode::kCorrupt, "frame " + std::to_string(frame_number) + ": " + what);
  };
  if (compressed.size() != frame.compressed_size) return corrupt("got " + std::to_string(compressed.size()) + " bytes, expected " + std::to_string(frame.compressed_size));
  if (xxh3_128(compressed) != frame.digest) return corrupt("compressed bytes do not match their XXH3-128 digest");
  if (compressed.size() < 4 || load_le32(compressed.data()) != kZstdFrameMagic) return corrupt("not a zstd frame");
  unsigned long long content = ZSTD_getFrameContentSize(compressed.data(), compressed.size());
  if (content != frame.uncompressed_size) return corrupt("Frame_Content_Size does not match the seek table");
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx(ZSTD_createDCtx());
  if (!dctx) return Status(ErrorCode::kInternal, "ZSTD_createDCtx failed");
  std::string out(frame.uncompressed_size, '\0');
  size_t n = ZSTD_decompressDCtx(dctx.get(), out.data(), out.size(), compressed.data(), compressed.size());
  if (ZSTD_isError(n)) return corrupt(std::string("zstd: ") + ZSTD_getErrorName(n));
  if (n != frame.uncompressed_size) return corrupt("decompressed to " + std::to_string(n) + " bytes, expected " + std::to_string(frame.uncompressed_size));
  if (xxh64_low32(std::as_bytes(std::span<const char>(out))) != frame.xxh64_low32) return corrupt("seek-table checksum mismatch");
  return out;
}

}  // namespace lazycache::format
