// SPDX-License-Identifier: MIT
// File: common/status.h -- the one error vocabulary of lazycache: ErrorCode, Status, Result<T>.
//
// Choosing a code (rules every module follows):
//  - kNotFound: the named thing does not exist (object key, archive entry, file).
//  - kUnavailable: transient; the same call may succeed later (5xx, 429, reset, stall).
//    Retryable, as is kTimeout (Status::retryable()): the store layer's RetryPolicy retries
//    them (RetryingObjectStore per call, S3ObjectStore per multipart part); nothing above it does.
//  - kCorrupt: bytes we read are wrong (magic, checksum, structure, bounds). Never retried as is.
//  - kPreconditionFailed: the object changed under us (ETag mismatch, 412).
//  - kUnsupported: a valid but newer/unknown format feature, or a server lacks a feature.
//  - kIo: a local OS call failed; errno is attached.
//  - kInternal: a bug in lazycache.
// Statuses compose context as they travel up: s.with_context("reading seek table of " + key).
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace lazycache {

// Values are stable: they appear in logs and exit-code tables; never renumber.
enum class ErrorCode : int {
  kOk = 0,
  kInvalidArgument = 1,
  kNotFound = 2,
  kAlreadyExists = 3,
  kPermissionDenied = 4,
  kPreconditionFailed = 5,
  kCorrupt = 6,
  kUnsupported = 7,
  kUnavailable = 8,
  kResourceExhausted = 9,
  kCancelled = 10,
  kIo = 11,
  kInternal = 12,
  kTimeout = 13,
};

const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message, int sys_errno = 0) : code_(code), message_(std::move(message)), errno_(sys_errno) {}

  static Status ok_status() { return Status(); }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  int sys_errno() const { return errno_; }
  bool retryable() const { return code_ == ErrorCode::kUnavailable || code_ == ErrorCode::kTimeout; }

  // Prefixes context, outermost first: "saving key k: uploading part 3: HTTP 503".
  Status with_context(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_, errno_);
  }
  // "corrupt: seek table: ..." (code name first so logs grep well).
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
  int errno_ = 0;
};

// Status from the current errno of a failed OS call on `what` (e.g. "open /x/y").
Status errno_status(const std::string& what, int err = errno);

// Explicitly drops a status; the reason is for the reader (and grep).
inline void ignore_error(const Status&, const char* /*why*/) {}

// A minimal expected-like type: holds a T or a non-ok Status. API is a subset of std::expected.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)
  Result(ErrorCode code, std::string message) : v_(Status(code, std::move(message))) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // The error; only valid when !ok().
  const Status& error() const { return std::get<1>(v_); }
  Status status() const { return ok() ? Status() : error(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace lazycache

#define LC_CONCAT_INNER(a, b) a##b
#define LC_CONCAT(a, b) LC_CONCAT_INNER(a, b)

#define LC_RETURN_IF_ERROR(expr) \
  do { \
    ::lazycache::Status lc_status_ = (expr); \
    if (!lc_status_.ok()) return lc_status_; \
  } while (0)

// NOLINTBEGIN(bugprone-macro-parentheses): tmp is a name and lhs a declaration ("Attr a"):
// neither can be put in parentheses.
#define LC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr); \
  if (!tmp.ok()) return tmp.error(); \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

#define LC_ASSIGN_OR_RETURN(lhs, expr) LC_ASSIGN_OR_RETURN_IMPL(LC_CONCAT(lc_result_, __LINE__), lhs, expr)
