// SPDX-License-Identifier: MIT
#include "common/status.h"

#include <cstring>

namespace lazycache {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kAlreadyExists: return "already exists";
    case ErrorCode::kPermissionDenied: return "permission denied";
    case ErrorCode::kPreconditionFailed: return "precondition failed";
    case ErrorCode::kCorrupt: return "corrupt";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kResourceExhausted: return "resource exhausted";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kIo: return "i/o error";
    case ErrorCode::kInternal: return "internal error";
    case ErrorCode::kTimeout: return "timeout";
  }
  return "unknown error";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string s = std::string(error_code_name(code_)) + ": " + message_;
  if (errno_ != 0 && code_ == ErrorCode::kIo) s += std::string(" (") + std::strerror(errno_) + ")";
  return s;
}

Status errno_status(const std::string& what, int err) {
  ErrorCode code = ErrorCode::kIo;
  if (err == ENOENT) code = ErrorCode::kNotFound;
  else if (err == EACCES || err == EPERM) code = ErrorCode::kPermissionDenied;
  else if (err == EEXIST) code = ErrorCode::kAlreadyExists;
  else if (err == ENOSPC || err == ENOMEM || err == EMFILE || err == ENFILE) code = ErrorCode::kResourceExhausted;
  return Status(code, what + ": " + std::strerror(err), err);
}

}  // namespace lazycache
