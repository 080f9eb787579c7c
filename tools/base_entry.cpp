// SPDX-License-Identifier: MIT
#include "tools/base_entry.h"

#include <algorithm>
#include <cstring>

#include "tools/store_options.h"

namespace lazycache::cli {
namespace {

// What ArchiveReader::open reads first from the end of an archive (format/archive_reader.cpp):
// the prefetched tail covers at least this, so that read is served from memory too.
constexpr uint64_t kFirstTailRead = 256 * 1024;

// A ByteSource whose last bytes were read already: reads inside them are copies, the rest go
// to the underlying source. Thread-safe (the tail is immutable).
class PrefetchedTailSource final : public ByteSource {
 public:
  PrefetchedTailSource(std::shared_ptr<const ByteSource> inner, std::string tail) : inner_(std::move(inner)), tail_(std::move(tail)) {}
  uint64_t size() const override { return inner_->size(); }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override {
    const uint64_t tail_start = inner_->size() - tail_.size();
    if (offset < tail_start) return inner_->read_at(offset, out);
    if (offset >= inner_->size()) return size_t{0};
    const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), inner_->size() - offset));
    std::memcpy(out.data(), tail_.data() + (offset - tail_start), n);
    return n;
  }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::shared_ptr<const ByteSource> inner_;
  std::string tail_;
};

}  // namespace

uint64_t base_tail_bytes(const format::Index& index, uint64_t object_bytes) {
  const auto frames = index.frames();
  if (frames.empty()) return object_bytes;
  const uint64_t data_end = frames.back().compressed_offset + frames.back().compressed_size;
  return data_end <= object_bytes ? object_bytes - data_end : object_bytes;
}

Result<BaseEntry> open_base_entry(std::shared_ptr<remote::ObjectStore> store, const std::string& object_key, const SaveRecord& r) {
  BaseEntry base;
  const std::string what = "the mounted entry " + object_key;
  auto replaced = [&](const std::string& now) {
    return Status(ErrorCode::kPreconditionFailed, what + " was replaced after it was mounted (ETag " + r.base_etag + ", now " + now + ")");
  };
  std::shared_ptr<const ByteSource> for_reader;
  if (!r.base_etag.empty() && r.base_size > 0 && r.base_tail > 0 && r.base_tail <= r.base_size) {
    base.object = remote::ObjectInfo{object_key, r.base_size, r.base_etag};
    base.source = open_entry_source(store, base.object);
    const uint64_t len = std::min(r.base_size, std::max(r.base_tail, kFirstTailRead));
    std::string tail(len, '\0');
    auto got = base.source->read_at(r.base_size - len, std::as_writable_bytes(std::span<char>(tail)));
    if (!got.ok() && got.error().code() == ErrorCode::kPreconditionFailed) return replaced("another (" + got.error().message() + ")");
    if (!got.ok()) return got.error().with_context(what + ": reading its tail");
    // A shorter object than recorded is another object, whatever its ETag says.
    if (*got != len) return replaced("shorter than the " + std::to_string(r.base_size) + " bytes mounted");
    for_reader = std::make_shared<PrefetchedTailSource>(base.source, std::move(tail));
  } else {
    auto object = store->head(object_key);
    if (!object.ok()) return object.error().with_context(what);
    // The mount served one version of the base; an entry replaced since (entries are immutable,
    // but a store can be written by anything) has other frames under the same names.
    if (!r.base_etag.empty() && object->etag != r.base_etag) return replaced(object->etag);
    base.object = *object;
    base.source = open_entry_source(store, base.object);
    for_reader = base.source;
  }
  LC_ASSIGN_OR_RETURN(base.reader, format::ArchiveReader::open(for_reader));
  return base;
}

}  // namespace lazycache::cli
