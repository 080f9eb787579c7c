// SPDX-License-Identifier: MIT
#include "format/frame_codec.h"

#include <zstd.h>

#include <xxhash.h>

#include <memory>
#include <vector>

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

namespace {

// Both decode_frame_checked_into() and decode_digested_frame_into(): `digest_checked` says the
// caller has already checked the compressed bytes' XXH3-128 (FrameSource::check).
Status decode_into(const FrameInfo& frame, uint32_t frame_number, std::span<const std::byte> compressed, std::span<std::byte> out,
                   bool digest_checked) {
  auto corrupt = [&](const std::string& what) {
    return Status(ErrorCode::kCorrupt, "frame " + std::to_string(frame_number) + ": " + what);
  };
  if (out.size() != frame.uncompressed_size)
    return Status(ErrorCode::kInvalidArgument, "frame " + std::to_string(frame_number) + ": output buffer of " +
                                                   std::to_string(out.size()) + " bytes for " + std::to_string(frame.uncompressed_size));
  if (compressed.size() != frame.compressed_size)
    return corrupt("got " + std::to_string(compressed.size()) + " bytes, expected " + std::to_string(frame.compressed_size));
  if (!digest_checked && xxh3_128(compressed) != frame.digest) return corrupt("compressed bytes do not match their XXH3-128 digest");
  if (compressed.size() < 4 || load_le32(compressed.data()) != kZstdFrameMagic) return corrupt("not a zstd frame");
  unsigned long long content = ZSTD_getFrameContentSize(compressed.data(), compressed.size());
  if (content != frame.uncompressed_size) return corrupt("Frame_Content_Size does not match the seek table");
  // A frame with zstd's Content_Checksum (bit 2 of the Frame_Header_Descriptor, RFC 8878 3.1.1.1.1;
  // pack always sets it) ends in the low 32 bits of XXH64 of its content, which zstd verifies
  // while decompressing: when those 4 bytes equal the seek table's, the content matches the seek
  // table without a second XXH64 pass over it (0.2 s of CPU for the 2.3 GB tree).
  // The frame must also be all of the bytes (nothing after it whose last 4 bytes could pose as
  // the checksum): ZSTD_findFrameCompressedSize walks the block headers only.
  const bool zstd_checks = compressed.size() >= 9 && (std::to_integer<uint8_t>(compressed[4]) & 0x04) != 0 &&
                           ZSTD_findFrameCompressedSize(compressed.data(), compressed.size()) == compressed.size();
  if (zstd_checks && load_le32(compressed.data() + compressed.size() - 4) != frame.xxh64_low32)
    return corrupt("seek-table checksum mismatch (the frame's own checksum differs)");
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx(ZSTD_createDCtx());
  if (!dctx) return Status(ErrorCode::kInternal, "ZSTD_createDCtx failed");
  size_t n = ZSTD_decompressDCtx(dctx.get(), out.data(), out.size(), compressed.data(), compressed.size());
  if (ZSTD_isError(n)) return corrupt(std::string("zstd: ") + ZSTD_getErrorName(n));
  if (n != frame.uncompressed_size)
    return corrupt("decompressed to " + std::to_string(n) + " bytes, expected " + std::to_string(frame.uncompressed_size));
  if (!zstd_checks && xxh64_low32(out) != frame.xxh64_low32) return corrupt("seek-table checksum mismatch");
  return Status();
}

}  // namespace

Status decode_frame_checked_into(const FrameInfo& frame, uint32_t frame_number, std::span<const std::byte> compressed,
                                 std::span<std::byte> out) {
  return decode_into(frame, frame_number, compressed, out, false);
}

Status decode_digested_frame_into(const FrameInfo& frame, uint32_t frame_number, std::span<const std::byte> compressed,
                                  std::span<std::byte> out) {
  return decode_into(frame, frame_number, compressed, out, true);
}

Result<std::string> decode_frame_checked(const FrameInfo& frame, uint32_t frame_number, std::span<const std::byte> compressed) {
  std::string out(frame.uncompressed_size, '\0');
  LC_RETURN_IF_ERROR(decode_frame_checked_into(frame, frame_number, compressed, std::as_writable_bytes(std::span<char>(out))));
  return out;
}

struct FrameDecoder::State {
  FrameInfo frame;
  uint32_t number = 0;
  Sink sink;
  std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx{ZSTD_createDCtx()};
  Xxh3Stream digest;
  XXH64_state_t* checksum = XXH64_createState();
  std::vector<std::byte> out = std::vector<std::byte>(1 << 20);
  uint64_t fed = 0, produced = 0;
  size_t last_hint = 1;  // ZSTD_decompressStream's: 0 once the frame is complete
  Status failed;

  Status corrupt(const std::string& what) const { return Status(ErrorCode::kCorrupt, "frame " + std::to_string(number) + ": " + what); }
};

FrameDecoder::FrameDecoder(const FrameInfo& frame, uint32_t frame_number, Sink sink) : state_(std::make_unique<State>()) {
  state_->frame = frame;
  state_->number = frame_number;
  state_->sink = std::move(sink);
  XXH64_reset(state_->checksum, 0);
  if (!state_->dctx || state_->checksum == nullptr) state_->failed = Status(ErrorCode::kInternal, "cannot create a zstd decoder");
}

FrameDecoder::~FrameDecoder() { XXH64_freeState(state_->checksum); }

Status FrameDecoder::feed(std::span<const std::byte> compressed) {
  State& s = *state_;
  if (!s.failed.ok()) return s.failed;
  if (s.fed == 0) {
    if (compressed.size() < 4 || load_le32(compressed.data()) != kZstdFrameMagic) return s.failed = s.corrupt("not a zstd frame");
    if (ZSTD_getFrameContentSize(compressed.data(), compressed.size()) != s.frame.uncompressed_size) {
      return s.failed = s.corrupt("Frame_Content_Size does not match the seek table");
    }
  }
  s.fed += compressed.size();
  if (s.fed > s.frame.compressed_size) return s.failed = s.corrupt("more compressed bytes than the seek table says");
  s.digest.update(compressed);
  ZSTD_inBuffer in{compressed.data(), compressed.size(), 0};
  while (in.pos < in.size) {
    ZSTD_outBuffer out{s.out.data(), s.out.size(), 0};
    const size_t hint = ZSTD_decompressStream(s.dctx.get(), &out, &in);
    if (ZSTD_isError(hint)) return s.failed = s.corrupt(std::string("zstd: ") + ZSTD_getErrorName(hint));
    s.last_hint = hint;
    s.produced += out.pos;
    if (s.produced > s.frame.uncompressed_size) return s.failed = s.corrupt("decompresses past the size in the seek table");
    if (out.pos > 0) {
      XXH64_update(s.checksum, s.out.data(), out.pos);
      if (Status w = s.sink(std::span<const std::byte>(s.out.data(), out.pos)); !w.ok()) return s.failed = w;
    }
    if (hint == 0 && in.pos < in.size) return s.failed = s.corrupt("bytes after the end of the zstd frame");
  }
  return Status();
}

Status FrameDecoder::finish() {
  State& s = *state_;
  if (!s.failed.ok()) return s.failed;
  if (s.fed != s.frame.compressed_size)
    return s.corrupt("got " + std::to_string(s.fed) + " bytes, expected " + std::to_string(s.frame.compressed_size));
  if (s.digest.digest() != s.frame.digest) return s.corrupt("compressed bytes do not match their XXH3-128 digest");
  // A frame whose output filled the buffer exactly may still hold bytes in zstd: drain them.
  while (s.last_hint != 0) {
    ZSTD_inBuffer in{nullptr, 0, 0};
    ZSTD_outBuffer out{s.out.data(), s.out.size(), 0};
    const size_t hint = ZSTD_decompressStream(s.dctx.get(), &out, &in);
    if (ZSTD_isError(hint)) return s.corrupt(std::string("zstd: ") + ZSTD_getErrorName(hint));
    if (out.pos == 0 && hint != 0) return s.corrupt("the zstd frame is incomplete");
    s.last_hint = hint;
    s.produced += out.pos;
    if (s.produced > s.frame.uncompressed_size) return s.corrupt("decompresses past the size in the seek table");
    XXH64_update(s.checksum, s.out.data(), out.pos);
    LC_RETURN_IF_ERROR(s.sink(std::span<const std::byte>(s.out.data(), out.pos)));
  }
  if (s.produced != s.frame.uncompressed_size) {
    return s.corrupt("decompressed to " + std::to_string(s.produced) + " bytes, expected " + std::to_string(s.frame.uncompressed_size));
  }
  if (static_cast<uint32_t>(XXH64_digest(s.checksum) & 0xFFFFFFFFu) != s.frame.xxh64_low32)
    return s.corrupt("seek-table checksum mismatch");
  return Status();
}

}  // namespace lazycache::format
