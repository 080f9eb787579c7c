// SPDX-License-Identifier: MIT
#include "fs/request_counts.h"

namespace lazycache::fs {

const char* request_name(FuseRequest r) {
  static constexpr std::array<const char*, kFuseRequestKinds> kNames = {
      "lookup",  "forget",  "getattr", "setattr",    "readlink",    "open",  "create", "read", "write",
      "release", "opendir", "readdir", "releasedir", "name_change", "xattr", "statfs", "fsync"};
  const auto i = static_cast<size_t>(r);
  return i < kNames.size() ? kNames[i] : "unknown";
}

}  // namespace lazycache::fs
