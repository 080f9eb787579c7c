// SPDX-License-Identifier: MIT
#include "tools/store_check.h"

#include <chrono>

#include "remote/store_url.h"
#include "tools/store_options.h"

namespace lazycache::cli {

std::string store_problem(const Status& error) {
  const std::string& m = error.message();
  auto has = [&m](const char* s) { return m.find(s) != std::string::npos; };
  switch (error.code()) {
    case ErrorCode::kInvalidArgument: return "the store URL or an option is invalid";
    case ErrorCode::kNotFound: return has("NoSuchBucket") ? "the bucket does not exist" : "the store (bucket or directory) does not exist";
    case ErrorCode::kPermissionDenied:
      if (has("credentials") && !has("HTTP")) return "no S3 credentials found (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE)";
      if (has("InvalidAccessKeyId")) return "the store does not know the access key (AWS_ACCESS_KEY_ID)";
      if (has("SignatureDoesNotMatch")) return "the secret key is wrong (AWS_SECRET_ACCESS_KEY), or the region";
      if (has("ExpiredToken") || has("InvalidToken")) return "the session token has expired (AWS_SESSION_TOKEN)";
      return "the credentials are refused (no permission to list the bucket)";
    case ErrorCode::kUnavailable:
    case ErrorCode::kTimeout: return "the store is not reachable (endpoint, network or the service)";
    default: return "the store cannot be used";
  }
}

StoreCheck check_store(const ArgParser& args) {
  StoreCheck check;
  check.store = remote::redact_url(store_url_from(args));
  const auto start = std::chrono::steady_clock::now();
  auto finish = [&](const Status& s) {
    check.ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count());
    check.ok = s.ok();
    if (!s.ok()) {
      check.problem = store_problem(s);
      check.detail = remote::redact_url(s.to_string());
    }
    return check;
  };
  auto store = open_store(args, /*max_attempts=*/2);
  if (!store.ok()) return finish(store.error());
  auto page = (*store)->list("", "");
  return finish(page.status());
}

}  // namespace lazycache::cli
