// SPDX-License-Identifier: MIT
#include "fs/errno_map.h"

#include <cerrno>

namespace lazycache::fs {

int errno_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return 0;
    case ErrorCode::kInvalidArgument: return EINVAL;
    case ErrorCode::kNotFound: return ENOENT;
    case ErrorCode::kAlreadyExists: return EEXIST;
    case ErrorCode::kPermissionDenied: return EACCES;
    case ErrorCode::kPreconditionFailed: return ESTALE;
    case ErrorCode::kUnsupported: return EOPNOTSUPP;
    case ErrorCode::kResourceExhausted: return ENOMEM;
    case ErrorCode::kCancelled: return EINTR;
    // A read that cannot be served after the store's retries is an I/O error, never EAGAIN:
    // callers of read(2) do not retry EAGAIN on regular files.
    case ErrorCode::kCorrupt:
    case ErrorCode::kUnavailable:
    case ErrorCode::kTimeout:
    case ErrorCode::kIo:
    case ErrorCode::kInternal: return EIO;
  }
  return EIO;
}

int errno_for(const Status& status) {
  if (status.code() == ErrorCode::kIo && status.sys_errno() > 0) return status.sys_errno();
  return errno_for(status.code());
}

}  // namespace lazycache::fs
