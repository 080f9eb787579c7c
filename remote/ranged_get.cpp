// SPDX-License-Identifier: MIT
#include "remote/ranged_get.h"

#include <charconv>
#include <ctime>

#include "common/quote.h"

namespace lazycache::remote {
namespace {

bool parse_u64(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::optional<ContentRange> parse_content_range(std::string_view v) {
  if (v.rfind("bytes ", 0) != 0) return std::nullopt;
  v.remove_prefix(6);
  auto dash = v.find('-'), slash = v.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || dash > slash) return std::nullopt;
  ContentRange r;
  if (!parse_u64(v.substr(0, dash), r.first) || !parse_u64(v.substr(dash + 1, slash - dash - 1), r.last) ||
      !parse_u64(v.substr(slash + 1), r.total))
    return std::nullopt;
  if (r.first > r.last || r.last >= r.total) return std::nullopt;
  return r;
}

int64_t parse_http_time(std::string_view value) {
  std::string v(value);
  std::tm tm{};
  const char* end = strptime(v.c_str(), "%a, %d %b %Y %H:%M:%S", &tm);
  if (!end) {
    tm = std::tm{};
    end = strptime(v.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  }
  if (!end) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

ObjectInfo object_info_from(const HttpResponse& response, std::string_view key) {
  ObjectInfo info;
  info.key = std::string(key);
  info.etag = response.header("etag");
  info.last_modified_s = parse_http_time(response.header("last-modified"));
  if (auto cr = parse_content_range(response.header("content-range"))) {
    info.size = cr->total;
  } else {
    uint64_t n = 0;
    if (parse_u64(response.header("content-length"), n)) info.size = n;
  }
  return info;
}

Result<size_t> checked_range_get(const HttpSender& send, const std::string& url, const RangeRequest& req, std::span<std::byte> out,
                                 const std::string& what) {
  if (req.length == 0 || out.size() < req.length) return Status(ErrorCode::kInvalidArgument, what + ": bad range length");
  uint64_t last = req.offset + req.length - 1;
  HttpRequest http;
  http.method = "GET";
  http.url = url;
  http.headers.emplace_back("Range", "bytes=" + std::to_string(req.offset) + "-" + std::to_string(last));
  if (!req.if_match.empty()) http.headers.emplace_back("If-Match", req.if_match);
  http.sink = out.first(req.length);
  // A 206's bytes are told as they come; a 206 for another range is refused below, after the
  // caller was told of bytes that are not its range: it checks what it uses (RangeRequest).
  http.on_sink_progress = req.on_progress;
  http.cancel = req.cancel;
  LC_ASSIGN_OR_RETURN(HttpResponse r, send(http, what));
  // 416 for "bytes=a-b" means a >= size: the read is at or past the end (Swift's 416 carries
  // no Content-Range to check that against).
  if (r.status == 416) return size_t{0};
  if (r.status == 200) {
    // The server ignored Range: only the whole object from offset 0 is usable (it fit the sink,
    // or HttpClient would have failed with kCorrupt).
    if (req.offset == 0) return r.sink_bytes;
    return Status(ErrorCode::kCorrupt, what + ": the server ignored the Range header (HTTP 200)");
  }
  if (r.status != 206) return status_from_http(r, what);
  // Some servers (s3rver) ignore If-Match on GET: the ETag of the reply is checked as well.
  if (std::string etag = r.header("etag"); !req.if_match.empty() && !etag.empty() && etag != req.if_match)
    return Status(ErrorCode::kPreconditionFailed,
                  what + ": the object was replaced (ETag " + quote_text(etag, 256) + ", expected " + req.if_match + ")");
  auto cr = parse_content_range(r.header("content-range"));
  if (!cr)
    return Status(ErrorCode::kCorrupt, what + ": 206 without a valid Content-Range (" + quote_text(r.header("content-range"), 256) + ")");
  bool end_ok = cr->last == last || (cr->last < last && cr->last == cr->total - 1);
  if (cr->first != req.offset || !end_ok)
    return Status(ErrorCode::kCorrupt, what + ": asked for bytes " + std::to_string(req.offset) + "-" + std::to_string(last) +
                                           ", got Content-Range " + quote_text(r.header("content-range"), 256));
  uint64_t expect = cr->last - cr->first + 1;
  if (r.sink_bytes != expect)
    return Status(ErrorCode::kUnavailable,
                  what + ": body ended after " + std::to_string(r.sink_bytes) + " of " + std::to_string(expect) + " bytes");
  return r.sink_bytes;
}

Result<std::optional<TailRead>> checked_suffix_get(const HttpSender& send, const std::string& url, std::string_view key, uint64_t length,
                                                   std::span<std::byte> out, const std::string& what) {
  if (length == 0 || out.size() < length) return Status(ErrorCode::kInvalidArgument, what + ": bad suffix length");
  HttpRequest http;
  http.method = "GET";
  http.url = url;
  http.headers.emplace_back("Range", "bytes=-" + std::to_string(length));
  http.sink = out.first(length);
  auto sent = send(http, what);
  if (!sent.ok()) {
    // A server that sent the object's head instead may overflow the sink: treat as "wrong".
    if (sent.error().code() == ErrorCode::kCorrupt) return std::optional<TailRead>();
    return sent.error();
  }
  HttpResponse& r = *sent;
  if (r.status == 416) {  // an empty object
    TailRead empty;
    empty.info = object_info_from(r, key);
    empty.info.size = 0;
    return std::optional<TailRead>(empty);
  }
  if (r.status != 200 && r.status != 206) return status_from_http(r, what);
  TailRead tail;
  tail.info = object_info_from(r, key);
  tail.bytes = r.sink_bytes;
  if (r.status == 200) {
    if (tail.info.size != r.sink_bytes) return std::optional<TailRead>();
    return std::optional<TailRead>(tail);
  }
  auto cr = parse_content_range(r.header("content-range"));
  if (!cr) return std::optional<TailRead>();
  uint64_t want = std::min<uint64_t>(length, cr->total);
  if (cr->last != cr->total - 1 || cr->last - cr->first + 1 != want) return std::optional<TailRead>();
  if (r.sink_bytes != want)
    return Status(ErrorCode::kUnavailable,
                  what + ": body ended after " + std::to_string(r.sink_bytes) + " of " + std::to_string(want) + " bytes");
  return std::optional<TailRead>(tail);
}

}  // namespace lazycache::remote
