// SPDX-License-Identifier: MIT
// File: remote/sigv4.h -- AWS Signature Version 4 as pure functions (OpenSSL one-shots).
//
// The request is described by SignRequest; sign() returns the Authorization header value,
// presign() a query string. Nothing here does I/O or reads clocks or credentials: the caller
// passes the time and keys, which is what makes the AWS documentation's test vectors unit tests.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lazycache::remote {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty unless temporary (STS/OIDC) credentials
  bool empty() const { return access_key_id.empty() || secret_access_key.empty(); }
};

inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";
// SHA-256 of the empty string: the payload hash of bodiless requests.
inline constexpr std::string_view kEmptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct SignRequest {
  std::string method;                                        // "GET"
  std::string path;                                          // already URI-encoded ("/bucket/a%20b")
  std::vector<std::pair<std::string, std::string>> query;    // raw (not encoded) name/value
  std::vector<std::pair<std::string, std::string>> headers;  // every header to sign, incl. host
  std::string payload_hash;                                  // hex sha256, or UNSIGNED-PAYLOAD
  std::string amz_date;                                      // "20130524T000000Z"
  std::string region;                                        // "us-east-1"
  std::string service = "s3";
};

std::string sha256_hex(std::string_view data);
std::string hex(std::string_view bytes);
// RFC 3986 encoding with AWS's unreserved set (A-Z a-z 0-9 - _ . ~); '/' kept unless encode_slash.
std::string uri_encode(std::string_view s, bool encode_slash);
// "YYYYMMDDTHHMMSSZ" for a Unix time.
std::string amz_date(int64_t unix_seconds);

std::string canonical_query(const std::vector<std::pair<std::string, std::string>>& query);
std::string canonical_request(const SignRequest& r, std::string* signed_headers = nullptr);
std::string string_to_sign(const SignRequest& r, const std::string& canonical);
// Hex signature of string_to_sign with the derived key.
std::string signature(const SignRequest& r, const std::string& secret, const std::string& to_sign);
// "AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3/aws4_request, SignedHeaders=..., Signature=..."
std::string authorization_header(const SignRequest& r, const AwsCredentials& creds);
// Presigned query (X-Amz-Algorithm ... X-Amz-Signature), payload UNSIGNED-PAYLOAD, only `host`
// (and any headers in r.headers) signed. r.query may hold extra parameters; they are included.
std::string presign_query(const SignRequest& r, const AwsCredentials& creds, int expires_s);

}  // namespace lazycache::remote
