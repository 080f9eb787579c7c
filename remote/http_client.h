// SPDX-License-Identifier: MIT
// File: remote/http_client.h -- HttpClient: one blocking HTTP request at a time per calling
// thread, on a pool of reused libcurl easy handles (so connections are kept alive), shared by
// S3ObjectStore and HttpObjectStore. Internal to remote/.
//
// Transport failures (resolve, connect, reset, stall below the low-speed limit, timeout) are
// returned as kUnavailable / kTimeout; any HTTP status, including 4xx/5xx, is a successful
// perform() whose caller decides (status_from_http maps them). A 2xx body can be written straight
// into a caller's buffer (ranged GETs: no copy); more bytes than fit is kCorrupt.
// Thread-safe: perform() may be called from many threads at once; each call takes its own handle.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "remote/transfer_config.h"

namespace lazycache::remote {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  std::string url;
  HeaderList headers;
  std::span<const std::byte> body;  // sent with PUT and POST (Content-Length set)
  std::span<std::byte> sink;        // if non-empty, a 2xx body goes here (must fit)
  // A 2xx body larger than `sink` ends the transfer there and the response (status, headers, the
  // bytes that fit) is returned, instead of kCorrupt: for callers that want the headers of a
  // server that ignored their Range (a 200 carries the whole size in Content-Length).
  bool overflow_ok = false;
  size_t max_body_bytes = 32 << 20;  // cap on a body collected into HttpResponse::body
  // Optional: told the bytes in `sink` so far after each piece of a 206 body lands there (a
  // ranged reply; never for other statuses, whose bytes may not be the range asked for).
  std::function<void(size_t)> on_sink_progress = {};
  // Optional: once it is true, the transfer ends (at the next body bytes, or at curl's progress
  // tick, at least once a second while it waits) and send() fails with kCancelled.
  const std::atomic<bool>* cancel = nullptr;
};

struct HttpResponse {
  long status = 0;
  HeaderList headers;     // names lower-cased, values trimmed
  std::string body;       // the body when no sink was used or the status is not 2xx (capped)
  size_t sink_bytes = 0;  // bytes written into the request's sink
  // The header's value, or "" when absent.
  std::string header(std::string_view lower_name) const;
};

class HttpClient {
 public:
  explicit HttpClient(TransferConfig config = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Blocking. `what` names the operation for errors ("GET s3://b/k"), never with credentials
  // (URLs in messages are cut at '?'). Errors: kUnavailable, kTimeout, kCorrupt (body larger
  // than the sink), kInvalidArgument (bad URL), kPermissionDenied (TLS verification).
  Result<HttpResponse> perform(const HttpRequest& request, const std::string& what);

  // Figures for tests and status lines.
  uint64_t requests() const { return requests_.load(); }
  int max_in_flight() const { return max_in_flight_.load(); }

 private:
  void* acquire();  // a CURL* from the pool or a new one
  void release(void* handle);
  TransferConfig config_;
  std::mutex mu_;            // guards idle_
  std::vector<void*> idle_;  // CURL* handles with their connection caches
  std::atomic<uint64_t> requests_{0};
  std::atomic<int> in_flight_{0}, max_in_flight_{0};
};

// Maps a non-2xx response to a Status naming `what` and, when the body is an S3 XML error, its
// <Code> and <Message>: 404 kNotFound, 401/403 kPermissionDenied, 412 kPreconditionFailed,
// 408/429/5xx and 400 RequestTimeout kUnavailable, 501 kUnsupported, else kInvalidArgument.
Status status_from_http(const HttpResponse& response, const std::string& what);
// The text of the first <tag>...</tag> in xml (entities decoded), or "".
std::string xml_value(std::string_view xml, std::string_view tag);
// Every <tag>...</tag> element's inner text (raw), in order.
std::vector<std::string_view> xml_elements(std::string_view xml, std::string_view tag);
std::string xml_unescape(std::string_view s);
std::string xml_escape(std::string_view s);

}  // namespace lazycache::remote
