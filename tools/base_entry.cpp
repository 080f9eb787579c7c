// SPDX-License-Identifier: MIT
#include "tools/base_entry.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/posix_files.h"
#include "format/hashing.h"
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

std::string tail_digest(std::string_view tail) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(format::xxh3_64(std::as_bytes(std::span<const char>(tail.data(), tail.size())))));
  return hex;
}

// Mount's copy of the tail, when the record names one and the file holds exactly `len` bytes
// with the recorded digest; else empty (the caller reads the tail from the store).
std::string copied_tail(const SaveRecord& r, uint64_t len) {
  if (r.base_tail_digest.empty() || r.state_dir.empty()) return {};
  auto copy = read_whole_file(base_tail_copy_path(r.state_dir), static_cast<size_t>(len) + 1);
  if (!copy.ok() || copy->size() != len || tail_digest(*copy) != r.base_tail_digest) return {};
  return std::move(copy).value();
}

}  // namespace

uint64_t base_tail_read_length(uint64_t base_size, uint64_t base_tail) { return std::min(base_size, std::max(base_tail, kFirstTailRead)); }

std::string base_tail_copy_path(const std::string& state_dir) { return state_dir + "/base-tail"; }

Result<std::string> keep_base_tail_copy(const std::string& state_dir, std::string_view tail) {
  LC_RETURN_IF_ERROR(replace_file(base_tail_copy_path(state_dir), tail, 0600));
  return tail_digest(tail);
}

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
    const uint64_t len = base_tail_read_length(r.base_size, r.base_tail);
    std::string tail = copied_tail(r, len);
    base.tail_from_mount = !tail.empty();
    if (tail.empty()) {
      tail.assign(len, '\0');
      auto got = base.source->read_at(r.base_size - len, std::as_writable_bytes(std::span<char>(tail)));
      if (!got.ok() && got.error().code() == ErrorCode::kPreconditionFailed) return replaced("another (" + got.error().message() + ")");
      if (!got.ok()) return got.error().with_context(what + ": reading its tail");
      // A shorter object than recorded is another object, whatever its ETag says.
      if (*got != len) return replaced("shorter than the " + std::to_string(r.base_size) + " bytes mounted");
    }
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
