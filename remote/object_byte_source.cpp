// SPDX-License-Identifier: MIT
#include "remote/object_byte_source.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "remote/parallel.h"

namespace lazycache::remote {

Result<std::shared_ptr<ObjectByteSource>> ObjectByteSource::open(std::shared_ptr<ObjectStore> store, std::string key,
                                                                 ObjectByteSourceConfig config) {
  std::string tail(std::max<uint64_t>(config.tail_bytes, 1), '\0');
  auto read = store->get_tail(key, tail.size(), std::as_writable_bytes(std::span<char>(tail)));
  if (!read.ok()) return read.error();
  tail.resize(read->bytes);
  auto src = std::shared_ptr<ObjectByteSource>(new ObjectByteSource(std::move(store), read->info, config));
  src->info_.key = key;
  src->tail_ = std::move(tail);
  src->requests_ = 1;
  src->bytes_fetched_ = src->tail_.size();
  return src;
}

std::shared_ptr<ObjectByteSource> ObjectByteSource::from_info(std::shared_ptr<ObjectStore> store, const ObjectInfo& info,
                                                              ObjectByteSourceConfig config) {
  return std::shared_ptr<ObjectByteSource>(new ObjectByteSource(std::move(store), info, config));
}

Result<std::shared_ptr<ObjectByteSource>> ObjectByteSource::from_tail(std::shared_ptr<ObjectStore> store, const ObjectInfo& info,
                                                                      std::string tail, ObjectByteSourceConfig config) {
  if (tail.size() > info.size)
    return Status(ErrorCode::kInvalidArgument,
                  "a tail of " + std::to_string(tail.size()) + " bytes for " + info.key + " of " + std::to_string(info.size) + " bytes");
  auto src = std::shared_ptr<ObjectByteSource>(new ObjectByteSource(std::move(store), info, config));
  src->tail_ = std::move(tail);
  src->requests_ = 1;
  src->bytes_fetched_ = src->tail_.size();
  return src;
}

Result<size_t> ObjectByteSource::fetch(uint64_t offset, std::span<std::byte> out, const ReadProgress& progress) const {
  if (offset >= info_.size || out.empty()) return size_t{0};
  size_t want = static_cast<size_t>(std::min<uint64_t>(out.size(), info_.size - offset));
  uint64_t tail_start = info_.size - tail_.size();
  if (offset >= tail_start) {
    std::memcpy(out.data(), tail_.data() + (offset - tail_start), want);
    if (progress) progress(want);
    return want;
  }
  // A read reaching into the tail (an index larger than the tail read at open) asks the store
  // only for the bytes before it.
  const size_t from_store = static_cast<size_t>(std::min<uint64_t>(want, tail_start - offset));
  if (from_store < want) std::memcpy(out.data() + from_store, tail_.data(), want - from_store);
  if (cancelled_.load(std::memory_order_relaxed)) return Status(ErrorCode::kCancelled, describe() + ": reads were cancelled");
  RangeRequest req{info_.key, offset, from_store, info_.etag, progress, &cancelled_};
  requests_.fetch_add(1);
  LC_ASSIGN_OR_RETURN(size_t n, store_->get_range(req, out.first(from_store)));
  bytes_fetched_.fetch_add(n);
  if (n != from_store)
    return Status(ErrorCode::kUnavailable, describe() + ": short read at " + std::to_string(offset) + ": " + std::to_string(n) + " of " +
                                               std::to_string(from_store) + " bytes");
  if (progress) progress(want);
  return want;
}

Result<size_t> ObjectByteSource::read_at(uint64_t offset, std::span<std::byte> out) const { return fetch(offset, out); }

Result<size_t> ObjectByteSource::read_at_streaming(uint64_t offset, std::span<std::byte> out, const ReadProgress& progress) const {
  return fetch(offset, out, progress);
}

Status ObjectByteSource::read_ranges(std::span<ReadRequest> requests) const {
  // Clip to the object, then order by offset so neighbours can be merged.
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return requests[a].offset < requests[b].offset; });
  struct Group {
    uint64_t begin = 0, end = 0;  // merged range, clipped to the object
    std::vector<size_t> members;  // indexes into requests
  };
  std::vector<Group> groups;
  for (size_t i : order) {
    auto& r = requests[i];
    r.bytes_read = 0;
    if (r.offset >= info_.size || r.out.empty()) continue;
    uint64_t end = std::min<uint64_t>(r.offset + r.out.size(), info_.size);
    if (!groups.empty()) {
      Group& g = groups.back();
      uint64_t new_end = std::max(g.end, end);
      if (r.offset <= g.end + config_.merge_gap_bytes && new_end - g.begin <= config_.max_request_bytes) {
        g.end = new_end;
        g.members.push_back(i);
        continue;
      }
    }
    groups.push_back(Group{r.offset, end, {i}});
  }
  return run_bounded(groups.size(), config_.concurrency, [&](size_t gi) -> Status {
    const Group& g = groups[gi];
    if (g.members.size() == 1) {
      auto& r = requests[g.members[0]];
      LC_ASSIGN_OR_RETURN(r.bytes_read, fetch(r.offset, r.out));
      return Status();
    }
    std::vector<std::byte> buf(g.end - g.begin);
    LC_ASSIGN_OR_RETURN(size_t n, fetch(g.begin, buf));
    (void)n;  // fetch fails unless it got the whole (clipped) range
    for (size_t i : g.members) {
      auto& r = requests[i];
      size_t len = static_cast<size_t>(std::min<uint64_t>(r.out.size(), g.end - r.offset));
      std::memcpy(r.out.data(), buf.data() + (r.offset - g.begin), len);
      r.bytes_read = len;
    }
    return Status();
  });
}

}  // namespace lazycache::remote
