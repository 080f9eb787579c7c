// SPDX-License-Identifier: MIT
// MultipartUpload's defaults: copy_parts for stores that copy one part at a time, and what stores
// that append parts in order cannot do (remote/multipart_upload.h).
#include "remote/multipart_upload.h"

#include <string>

#include "remote/object_store.h"

namespace lazycache::remote {

Status MultipartUpload::copy_parts(int first_number, const std::vector<RangeRequest>& sources, int concurrency) {
  (void)concurrency;  // a local file is appended in order: nothing to overlap
  for (size_t i = 0; i < sources.size(); ++i) LC_RETURN_IF_ERROR(copy_part(first_number + static_cast<int>(i), sources[i]));
  return Status();
}

Status MultipartUpload::check_copy_sources(const std::vector<RangeRequest>&) { return Status(); }

Result<ObjectInfo> MultipartUpload::complete_checking(const std::vector<RangeRequest>& sources) {
  LC_RETURN_IF_ERROR(check_copy_sources(sources));
  return complete();
}

Status MultipartUpload::discard_part(int number) {
  return Status(ErrorCode::kUnsupported, "part " + std::to_string(number) + " cannot be discarded: this store appends parts in order");
}

}  // namespace lazycache::remote
