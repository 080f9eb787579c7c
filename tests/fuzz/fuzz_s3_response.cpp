// SPDX-License-Identifier: MIT
// Fuzz target: what an S3 or HTTP server sends back -- status, Content-Range, ETag,
// Content-Length, Last-Modified and an XML body -- through the parsers that read it
// (remote/ranged_get.h, remote/http_client.h) and through checked_range_get/checked_suffix_get
// with a sender that answers with the fuzzed reply. Rule: a reply is used only when it is
// exactly the bytes asked for; otherwise it is refused with one of the documented codes.
//
// Input: NUL-separated fields (tests/fuzz/fuzz_fields.h): 0 status, 1 Content-Range, 2 ETag,
// 3 Content-Length, 4 Last-Modified, 5 the request's If-Match, 6 offset, 7 length (1..65536),
// 8 a Unix time for the date round trip; everything after the 9th NUL is the body.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "remote/http_client.h"
#include "remote/ranged_get.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_fields.h"

using namespace lazycache;
using namespace lazycache::remote;

namespace {

[[noreturn]] void fail(const std::string& what) { fuzz::fail(what.c_str(), Status()); }

bool documented_code(ErrorCode c) {
  switch (c) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
    case ErrorCode::kPermissionDenied:
    case ErrorCode::kPreconditionFailed:
    case ErrorCode::kUnsupported:
    case ErrorCode::kUnavailable:
    case ErrorCode::kCorrupt: return true;
    default: return false;
  }
}

void check_status_mapping(const HttpResponse& r) {
  const std::string what = "GET s3://b/k";
  Status s = status_from_http(r, what);
  if (s.message().rfind(what + ": HTTP " + std::to_string(r.status), 0) != 0) fail("status_from_http lost the operation or status");
  std::string code = xml_value(r.body, "Code");
  ErrorCode want = ErrorCode::kInvalidArgument;
  long st = r.status;
  if (st == 404) want = ErrorCode::kNotFound;
  else if (st == 401 || st == 403) want = ErrorCode::kPermissionDenied;
  else if (st == 412) want = ErrorCode::kPreconditionFailed;
  else if (st == 501) want = ErrorCode::kUnsupported;
  else if (st == 408 || st == 429 || st >= 500 || code == "RequestTimeout" || code == "SlowDown") want = ErrorCode::kUnavailable;
  if (s.code() != want) fuzz::fail("status_from_http maps the status to the wrong code", s);
}

void check_xml(std::string_view body) {
  std::string esc = xml_escape(body);
  if (esc.find_first_of("<>\"'") != std::string::npos) fail("xml_escape left markup");
  if (xml_unescape(esc) != body) fail("xml_unescape does not invert xml_escape");
  for (const char* tag : {"Key", "Contents", "Code"}) {
    for (std::string_view e : xml_elements(body, tag)) {
      if (e.data() < body.data() || e.data() + e.size() > body.data() + body.size()) fail("xml_elements points outside the body");
    }
  }
  (void)xml_value(body, "Message");
}

void check_content_range(std::string_view v) {
  auto cr = parse_content_range(v);
  if (!cr) return;
  if (v.rfind("bytes ", 0) != 0 || cr->first > cr->last || cr->last >= cr->total) fail("parse_content_range accepted an impossible range");
  std::string again = "bytes " + std::to_string(cr->first) + "-" + std::to_string(cr->last) + "/" + std::to_string(cr->total);
  auto back = parse_content_range(again);
  if (!back || back->first != cr->first || back->last != cr->last || back->total != cr->total) fail("parse_content_range round trip");
}

// Both date forms the parser reads come back as the time they were written from.
void check_http_time(uint64_t seed, std::string_view field) {
  (void)parse_http_time(field);
  std::time_t t = static_cast<std::time_t>(seed % 253402300800ULL);  // 1970 .. 9999
  std::tm tm{};
  gmtime_r(&t, &tm);
  char rfc[64], iso[64];
  if (std::strftime(rfc, sizeof rfc, "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0) std::abort();
  if (std::strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%S.000Z", &tm) == 0) std::abort();
  if (parse_http_time(rfc) != t) fail(std::string("parse_http_time misreads ") + rfc);
  if (parse_http_time(iso) != t) fail(std::string("parse_http_time misreads ") + iso);
}

// A sender that answers with the fuzzed reply, filling the sink as HttpClient does (a 2xx body
// larger than the sink is kCorrupt), and records the request it got.
struct FakeServer {
  HttpResponse reply;
  std::string body;
  HttpRequest seen;
  Result<HttpResponse> operator()(HttpRequest& req, const std::string& what) {
    seen = req;
    HttpResponse r = reply;
    if (r.status >= 200 && r.status < 300 && !req.sink.empty()) {
      if (body.size() > req.sink.size()) return Status(ErrorCode::kCorrupt, what + ": body larger than the buffer");
      std::memcpy(req.sink.data(), body.data(), body.size());
      r.sink_bytes = body.size();
    } else {
      r.body = body;
    }
    return r;
  }
};

void check_range_get(FakeServer& server, uint64_t offset, uint64_t length, const std::string& if_match) {
  std::vector<std::byte> out(length);
  RangeRequest req{"k", offset, length, if_match};
  HttpSender send = [&server](HttpRequest& r, const std::string& w) { return server(r, w); };
  auto got = checked_range_get(send, "http://h/k", req, out, "GET k");
  std::string range = "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1);
  bool range_sent = false, if_match_sent = false;
  for (const auto& [n, v] : server.seen.headers) {
    range_sent |= n == "Range" && v == range;
    if_match_sent |= n == "If-Match" && v == if_match;
  }
  if (!range_sent || if_match_sent != !if_match.empty()) fail("checked_range_get sent the wrong Range or If-Match");
  if (!got.ok()) {
    if (!documented_code(got.error().code())) fuzz::fail("checked_range_get", got.error());
    return;
  }
  const HttpResponse& r = server.reply;
  if (*got > length) fail("checked_range_get returned more than asked");
  if (r.status == 416) {
    if (*got != 0) fail("416 read as bytes");
  } else if (r.status == 200) {
    if (offset != 0 || *got != server.body.size()) fail("a 200 reply used for a range not at 0");
  } else if (r.status == 206) {
    auto cr = parse_content_range(r.header("content-range"));
    uint64_t last = offset + length - 1;
    if (!cr || cr->first != offset || *got != cr->last - cr->first + 1 || (cr->last != last && cr->last != cr->total - 1))
      fail("a 206 reply used for bytes other than those asked");
    if (!if_match.empty() && !r.header("etag").empty() && r.header("etag") != if_match) fail("a replaced object's bytes used");
  } else {
    fail("checked_range_get accepted HTTP " + std::to_string(r.status));
  }
}

void check_suffix_get(FakeServer& server, uint64_t length) {
  std::vector<std::byte> out(length);
  HttpSender send = [&server](HttpRequest& r, const std::string& w) { return server(r, w); };
  auto got = checked_suffix_get(send, "http://h/k", "k", length, out, "GET tail of k");
  if (!got.ok()) {
    if (!documented_code(got.error().code())) fuzz::fail("checked_suffix_get", got.error());
    return;
  }
  if (!*got) return;  // "this server answers suffix ranges wrongly": the caller falls back
  const TailRead& tail = **got;
  const HttpResponse& r = server.reply;
  if (tail.bytes > length) fail("checked_suffix_get returned more than asked");
  if (r.status == 416) {
    if (tail.bytes != 0 || tail.info.size != 0) fail("416 read as a non-empty object");
  } else if (r.status == 200) {
    if (tail.info.size != tail.bytes || tail.bytes != server.body.size()) fail("a 200 reply used that is not the whole object");
  } else if (r.status == 206) {
    auto cr = parse_content_range(r.header("content-range"));
    if (!cr || cr->last != cr->total - 1 || tail.bytes != std::min<uint64_t>(length, cr->total) || tail.info.size != cr->total)
      fail("a 206 reply used that is not the object's last bytes");
  } else {
    fail("checked_suffix_get accepted HTTP " + std::to_string(r.status));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Fields f(data, size);
  FakeServer server;
  server.reply.status = static_cast<long>(fuzz::to_u64(f.get(0)) % 1000);
  const char* names[] = {"content-range", "etag", "content-length", "last-modified"};
  for (size_t i = 0; i < 4; ++i)
    if (std::string v = f.get(i + 1); !v.empty()) server.reply.headers.emplace_back(names[i], v);
  server.body = std::string(f.rest_after(9));
  server.reply.body = server.body;

  check_content_range(f.get(1));
  check_http_time(fuzz::to_u64(f.get(8)), f.get(4));
  check_xml(server.body);
  check_status_mapping(server.reply);

  ObjectInfo info = object_info_from(server.reply, "k");
  if (info.key != "k" || info.etag != f.get(2)) fail("object_info_from lost the key or the ETag");
  if (auto cr = parse_content_range(f.get(1)); cr && info.size != cr->total) fail("object_info_from ignored Content-Range's total");

  server.reply.body.clear();  // the fake server fills body or sink per request, as curl would
  uint64_t length = fuzz::to_u64(f.get(7)) % 65536 + 1;
  check_range_get(server, fuzz::to_u64(f.get(6)), length, f.get(5));
  check_suffix_get(server, length);
  return 0;
}
