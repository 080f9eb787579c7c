// SPDX-License-Identifier: MIT
// FrameSource: cache, else a merged range read, then the check (format/frame_source.h).
#include "format/frame_source.h"

#include <algorithm>

#include "format/hashing.h"

namespace lazycache::format {

namespace {

class NoFrameCache final : public FrameDataCache {
 public:
  Result<ByteBuffer> get(const Digest128& /*digest*/) override { return Status(ErrorCode::kNotFound, "no frame cache"); }
  Status put(const Digest128& /*digest*/, std::span<const std::byte> /*bytes*/) override { return Status(); }
};

// The rule for a short read (format/frame_source.h): the archive ends before its seek table says.
Status short_read(const std::string& what, uint64_t offset, uint64_t want, uint64_t got) {
  return Status(ErrorCode::kCorrupt, what + " truncated: bytes " + std::to_string(offset) + "+" + std::to_string(want) + " gave " +
                                         std::to_string(got) + " (the archive is shorter than its seek table says)");
}

}  // namespace

FrameDataCache& no_frame_cache() {
  static NoFrameCache cache;
  return cache;
}

std::vector<std::pair<size_t, size_t>> contiguous_runs(std::span<const FrameInfo> all, std::span<const uint32_t> frames) {
  std::vector<std::pair<size_t, size_t>> runs;
  size_t i = 0;
  while (i < frames.size()) {
    size_t j = i + 1;
    while (j < frames.size() && frames[j] == frames[j - 1] + 1 &&
           all[frames[j]].compressed_offset == all[frames[j - 1]].compressed_offset + all[frames[j - 1]].compressed_size) {
      ++j;
    }
    runs.emplace_back(i, j);
    i = j;
  }
  return runs;
}

FrameSource::FrameSource(const ByteSource& source, std::span<const FrameInfo> frames, FrameDataCache& cache, BadCopyHook on_bad_copy)
    : source_(source), frames_(frames), cache_(cache), on_bad_copy_(std::move(on_bad_copy)) {}

std::string FrameSource::frames_label(uint32_t first, uint32_t last) const {
  return (first == last ? "frame " + std::to_string(first) : "frames " + std::to_string(first) + "-" + std::to_string(last)) + " of " +
         source_.describe();
}

uint64_t FrameSource::span_bytes(uint32_t first, uint32_t last) const {
  return frames_[last].compressed_offset + frames_[last].compressed_size - frames_[first].compressed_offset;
}

Status FrameSource::check(uint32_t frame, std::span<const std::byte> bytes) const {
  const FrameInfo& f = frames_[frame];
  if (bytes.size() != f.compressed_size)
    return Status(ErrorCode::kCorrupt, frames_label(frame, frame) + ": " + std::to_string(bytes.size()) + " bytes, the seek table says " +
                                           std::to_string(f.compressed_size));
  if (xxh3_128(bytes) != f.digest)
    return Status(ErrorCode::kCorrupt, frames_label(frame, frame) + " (bytes " + std::to_string(f.compressed_offset) + "+" +
                                           std::to_string(f.compressed_size) + ") failed its XXH3-128 digest check");
  return Status();
}

Result<ByteBuffer> FrameSource::cached(uint32_t frame) const {
  Result<ByteBuffer> got = cache_.get(frames_[frame].digest);
  Status bad;
  if (got.ok()) {
    bad = check(frame, std::as_bytes(std::span<const char>(got->data(), got->size())));
    if (bad.ok()) return got;
  } else if (got.error().code() == ErrorCode::kNotFound) {
    return got;
  } else {
    bad = got.error();
  }
  if (on_bad_copy_) on_bad_copy_(frame, bad);
  return Status(ErrorCode::kNotFound, "the cached copy of " + frames_label(frame, frame) + " is unusable: " + bad.message());
}

void FrameSource::store(uint32_t frame, std::span<const std::byte> bytes) const {
  ignore_error(cache_.put(frames_[frame].digest, bytes), "the cache reports its own failures (FrameDataCache::put)");
}

RangeRead FrameSource::read_range(uint64_t offset, std::span<std::byte> out, const std::string& what, const ReadProgress& progress) const {
  RangeRead r;
  Result<size_t> n = progress ? source_.read_at_streaming(offset, out, progress) : source_.read_at(offset, out);
  if (!n.ok()) {
    r.status = n.error().with_context("reading " + what);
    return r;
  }
  r.bytes_read = *n;
  if (*n != out.size()) r.status = short_read(what, offset, out.size(), *n);
  return r;
}

RangeRead FrameSource::read_run(uint32_t first, uint32_t last, std::span<std::byte> out, uint64_t prefilled,
                                const FrameReady& ready) const {
  RangeRead r;
  if (first > last || last >= frames_.size()) {
    r.status = Status(ErrorCode::kInvalidArgument,
                      "read_run of frames " + std::to_string(first) + "-" + std::to_string(last) + " of " + std::to_string(frames_.size()));
    return r;
  }
  const std::string what = frames_label(first, last);
  const uint64_t begin = frames_[first].compressed_offset;
  uint32_t next = first;        // the first frame not checked yet
  std::vector<Status> checked;  // frames first..next-1
  // Checks (and hands to `ready`) the frames whose bytes are all within out[0, filled).
  auto check_upto = [&](uint64_t filled) {
    while (next <= last && frames_[next].compressed_offset - begin + frames_[next].compressed_size <= filled) {
      Status s = check(next, out.subspan(frames_[next].compressed_offset - begin, frames_[next].compressed_size));
      if (s.ok() && ready) ready(next);
      checked.push_back(std::move(s));
      ++next;
    }
  };
  bool back_to_back = true;
  for (uint32_t f = first + 1; f <= last; ++f)
    back_to_back = back_to_back && frames_[f].compressed_offset == frames_[f - 1].compressed_offset + frames_[f - 1].compressed_size;
  if (!back_to_back) {
    r.status = Status(ErrorCode::kInvalidArgument, what + " are not back to back in the archive");
  } else if (out.size() != span_bytes(first, last) || prefilled > out.size()) {
    r.status = Status(ErrorCode::kInvalidArgument, "read_run of " + what + ": buffer of " + std::to_string(out.size()) + " bytes");
  } else {
    if (ready) check_upto(prefilled);
    if (prefilled < out.size()) {
      ReadProgress progress;
      if (ready) progress = [&](size_t filled) { check_upto(prefilled + filled); };
      r = read_range(begin + prefilled, out.subspan(prefilled), what, progress);
    }
  }
  if (r.status.ok()) check_upto(out.size());
  r.frames = std::move(checked);
  for (uint32_t f = next; f <= last; ++f) r.frames.push_back(r.status);
  return r;
}

Result<FetchCounts> FrameSource::fetch(uint32_t first, uint32_t last, std::span<std::byte> out) const {
  if (first > last || last >= frames_.size())
    return Status(ErrorCode::kInvalidArgument,
                  "fetch of frames " + std::to_string(first) + "-" + std::to_string(last) + " of " + std::to_string(frames_.size()));
  if (out.size() != span_bytes(first, last))
    return Status(ErrorCode::kInvalidArgument,
                  "fetch of " + frames_label(first, last) + ": buffer of " + std::to_string(out.size()) + " bytes");
  const uint64_t begin = frames_[first].compressed_offset;
  auto slot = [&](uint32_t f) { return out.subspan(frames_[f].compressed_offset - begin, frames_[f].compressed_size); };
  FetchCounts counts;
  std::vector<uint32_t> misses;
  for (uint32_t f = first; f <= last; ++f) {
    Result<ByteBuffer> hit = cached(f);
    if (hit.ok()) {
      std::copy_n(reinterpret_cast<const std::byte*>(hit->data()), hit->size(), slot(f).begin());
      ++counts.from_cache;
    } else {
      misses.push_back(f);
    }
  }
  const auto runs = contiguous_runs(frames_, misses);
  std::vector<ReadRequest> requests;
  for (const auto& [i, j] : runs) {
    const uint64_t offset = frames_[misses[i]].compressed_offset;
    requests.push_back(ReadRequest{offset, out.subspan(offset - begin, span_bytes(misses[i], misses[j - 1])), 0});
  }
  if (!requests.empty()) LC_RETURN_IF_ERROR(source_.read_ranges(requests).with_context("reading " + frames_label(first, last)));
  for (size_t k = 0; k < runs.size(); ++k) {
    const auto [i, j] = runs[k];
    const ReadRequest& req = requests[k];
    counts.source_bytes += req.bytes_read;
    if (req.bytes_read != req.out.size())
      return short_read(frames_label(misses[i], misses[j - 1]), req.offset, req.out.size(), req.bytes_read);
    for (size_t p = i; p < j; ++p) LC_RETURN_IF_ERROR(check(misses[p], slot(misses[p])));
  }
  counts.from_source = static_cast<uint32_t>(misses.size());
  counts.range_reads = static_cast<uint32_t>(runs.size());
  return counts;
}

}  // namespace lazycache::format
