// SPDX-License-Identifier: MIT
// File: remote/ranged_get.h -- checked ranged and suffix GETs over HTTP, shared by S3ObjectStore
// and HttpObjectStore. Internal to remote/.
//
// Every 206 is checked against what was asked: Content-Range must start at the requested offset,
// end at the requested end or at the object's last byte, and the body length must match it. A
// 200 (Range ignored) is accepted only when it is the whole object and fits the request. A wrong
// reply is kCorrupt, never silently used.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "remote/http_client.h"
#include "remote/object_store.h"

namespace lazycache::remote {

// Sends a request (S3 signs it first) and returns the response of any status.
using HttpSender = std::function<Result<HttpResponse>(HttpRequest&, const std::string& what)>;

struct ContentRange {
  uint64_t first = 0, last = 0, total = 0;
};
// "bytes a-b/total" (total may not be '*'). nullopt when malformed.
std::optional<ContentRange> parse_content_range(std::string_view value);
// Size, ETag and Last-Modified of a HEAD/GET reply (size from Content-Range's total when present).
ObjectInfo object_info_from(const HttpResponse& response, std::string_view key);
// "Tue, 15 Nov 1994 08:12:31 GMT" or ISO 8601 "2024-01-02T03:04:05.000Z" -> seconds; 0 if neither.
int64_t parse_http_time(std::string_view value);

// GET url with Range and If-Match. Returns bytes read (short only at the end of the object; 0 at
// or past the end). Errors: kPreconditionFailed (412), kCorrupt (bad reply), the sender's.
Result<size_t> checked_range_get(const HttpSender& send, const std::string& url, const RangeRequest& req, std::span<std::byte> out,
                                 const std::string& what);

// GET url with "Range: bytes=-length". nullopt when the server answered the suffix range with
// other bytes (s3rver returns the first bytes): the caller falls back to HEAD + absolute range.
Result<std::optional<TailRead>> checked_suffix_get(const HttpSender& send, const std::string& url, std::string_view key, uint64_t length,
                                                   std::span<std::byte> out, const std::string& what);

}  // namespace lazycache::remote
