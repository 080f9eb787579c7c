// SPDX-License-Identifier: MIT
// File: remote/store_url.h -- parsing the --store URL forms and S3 endpoint URLs.
//
//   /abs/dir, rel/dir, file:///abs/dir   a local directory (LocalDirObjectStore)
//   s3://bucket[/prefix]                 S3 or compatible (S3ObjectStore); the endpoint, region
//                                        and addressing style come from options or AWS_* vars
//   http(s)://host[:port][/path][?query] read-only HTTP (HttpObjectStore); a query string marks
//                                        a presigned URL that names one object
// Pure functions, no I/O except getcwd() for relative paths.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace lazycache::remote {

struct StoreUrl {
  enum class Kind { kLocalDir, kS3, kHttp };
  Kind kind = Kind::kLocalDir;
  std::string dir;         // kLocalDir: absolute, no trailing '/'
  std::string bucket;      // kS3
  std::string prefix;      // kS3: key prefix, no leading or trailing '/', may be empty
  std::string http_base;   // kHttp: "scheme://authority[/path]" without trailing '/' or query
  std::string http_query;  // kHttp: the query of a presigned URL without '?', else empty
  // For messages: the URL without any query (a presigned query carries a signature) and with
  // any userinfo redacted (redact_url()).
  std::string display() const;
};

// The one redaction every output path uses (messages, stdout, status, logs, state files, save
// records, the process's own argv): `text` with the userinfo of a URL in it ("user:pass@")
// replaced by "***" and the value of each query or fragment parameter that can carry a
// credential replaced by "***" (is_secret_param()); everything else kept, so the host, path and
// expiry stay readable. Text before the first "://" is kept too, so "--store=URL" works as is;
// text without "://" is returned unchanged. Pure.
std::string redact_url(std::string_view text);
// True when a query parameter named `name` (case-insensitive, after %-decoding) can carry a
// secret: AWS SigV4 and SigV2 presigned (X-Amz-Signature, X-Amz-Credential,
// X-Amz-Security-Token, Signature, AWSAccessKeyId), GCS (X-Goog-Signature, X-Goog-Credential,
// GoogleAccessId), Azure SAS (sig), CloudFront (Signature, Key-Pair-Id), and the generic token,
// key, secret, password and auth families. Errs on the side of redacting.
bool is_secret_param(std::string_view name);

// Errors: kInvalidArgument naming the URL and what is wrong with it.
Result<StoreUrl> parse_store_url(std::string_view url);

// "http://host:port" or "https://host" (an S3 endpoint; a trailing '/' is dropped).
struct HttpEndpoint {
  std::string scheme;  // "http" or "https"
  std::string host;    // host[:port] exactly as given (used in the Host header and signature)
  std::string url() const { return scheme + "://" + host; }
};
Result<HttpEndpoint> parse_endpoint(std::string_view url);

}  // namespace lazycache::remote
