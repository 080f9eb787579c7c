// SPDX-License-Identifier: MIT
// File: remote/aws_config.h -- where S3 settings come from, as the AWS CLI and SDKs read them:
//   credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else the profile
//     (AWS_PROFILE, default "default") in AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials), else
//     the same keys in that profile of AWS_CONFIG_FILE (~/.aws/config, section "[profile X]");
//   region: AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else us-east-1;
//   endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's `endpoint_url`, else AWS.
// CredentialSource caches the credentials and reloads them on demand (a 403 ExpiredToken or
// InvalidAccessKeyId), so a long mount recovers once valid credentials return. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "remote/sigv4.h"

namespace lazycache::remote {

// Reads the environment and the files each call. kPermissionDenied when none are found (the
// message says where it looked, never a value).
Result<AwsCredentials> load_aws_credentials();
std::string aws_region();
std::string aws_endpoint_url();  // "" = AWS itself

class CredentialSource {
 public:
  using Loader = std::function<Result<AwsCredentials>()>;
  explicit CredentialSource(Loader loader) : loader_(std::move(loader)) {}
  // Fixed credentials (tests, --no-sign ... ): reload() never changes them.
  static std::shared_ptr<CredentialSource> fixed(AwsCredentials creds);

  // Loads on first use. Errors: the loader's.
  Result<AwsCredentials> current();
  // Re-runs the loader; true when it returned credentials different from the cached ones.
  bool reload();

 private:
  Loader loader_;
  std::mutex mu_;  // guards cached_, loaded_
  AwsCredentials cached_;
  bool loaded_ = false;
};

}  // namespace lazycache::remote
