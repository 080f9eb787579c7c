// SPDX-License-Identifier: MIT
#include "remote/object_store.h"

#include <algorithm>

namespace lazycache::remote {

Result<TailRead> ObjectStore::get_tail(std::string_view key, uint64_t length, std::span<std::byte> out) {
  if (length == 0 || out.size() < length) return Status(ErrorCode::kInvalidArgument, "get_tail of " + std::string(key) + ": bad length");
  TailRead tail;
  LC_ASSIGN_OR_RETURN(tail.info, head(key));
  uint64_t n = std::min<uint64_t>(length, tail.info.size);
  if (n == 0) return tail;
  RangeRequest req{std::string(key), tail.info.size - n, n, tail.info.etag};
  LC_ASSIGN_OR_RETURN(tail.bytes, get_range(req, out.first(n)));
  if (tail.bytes != n)
    return Status(ErrorCode::kUnavailable,
                  "short tail read of " + std::string(key) + ": " + std::to_string(tail.bytes) + " of " + std::to_string(n) + " bytes");
  return tail;
}

Result<std::unique_ptr<MultipartUpload>> ObjectStore::start_upload(std::string_view key, const PutOptions&) {
  return Status(ErrorCode::kUnsupported, describe() + " cannot copy ranges of its objects (uploading " + std::string(key) + ")");
}

Status check_object_key(std::string_view key) {
  auto bad = [&](const char* why) { return Status(ErrorCode::kInvalidArgument, "invalid object key '" + std::string(key) + "': " + why); };
  if (key.empty()) return bad("empty");
  if (key.size() > 1024) return bad("longer than 1024 bytes");
  if (key.front() == '/') return bad("starts with '/'");
  if (key.find('\0') != std::string_view::npos) return bad("contains NUL");
  size_t start = 0;
  while (start <= key.size()) {
    size_t end = key.find('/', start);
    if (end == std::string_view::npos) end = key.size();
    std::string_view seg = key.substr(start, end - start);
    if (seg == "." || seg == "..") return bad("has a '.' or '..' segment");
    start = end + 1;
  }
  return Status();
}

}  // namespace lazycache::remote
