// SPDX-License-Identifier: MIT
#include "remote/http_client.h"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstring>

#include "common/quote.h"
#include "remote/curl_library.h"
#include "remote/store_url.h"

namespace lazycache::remote {
namespace {

std::once_flag g_curl_init;

struct Transfer {
  const CurlApi* api = nullptr;
  const HttpRequest* request = nullptr;
  HttpResponse* response = nullptr;
  CURL* curl = nullptr;
  size_t body_offset = 0;  // of request->body already sent
  bool overflow = false;   // the 2xx body did not fit the sink
};

bool cancelled(const Transfer* t) { return t->request->cancel != nullptr && t->request->cancel->load(std::memory_order_relaxed); }

// curl's progress callback, set only for a request that can be cancelled: non-zero aborts.
int on_progress_tick(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return cancelled(static_cast<const Transfer*>(user)) ? 1 : 0;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  return std::string(s);
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    t->response->headers.clear();  // a new status line (after 100 Continue or a redirect)
  } else if (auto colon = line.find(':'); colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    t->response->headers.emplace_back(std::move(name), trim(line.substr(colon + 1)));
  }
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  if (cancelled(t)) return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  long status = 0;
  t->api->easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (!t->request->sink.empty() && status >= 200 && status < 300) {
    auto& got = t->response->sink_bytes;
    if (len > t->request->sink.size() - got) {
      t->overflow = true;
      return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
    }
    std::memcpy(t->request->sink.data() + got, data, len);
    got += len;
    if (status == 206 && t->request->on_sink_progress) t->request->on_sink_progress(got);
    return len;
  }
  auto& body = t->response->body;
  if (body.size() < t->request->max_body_bytes) body.append(data, std::min(len, t->request->max_body_bytes - body.size()));
  return len;
}

size_t on_read(char* out, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = std::min(size * n, t->request->body.size() - t->body_offset);
  std::memcpy(out, t->request->body.data() + t->body_offset, len);
  t->body_offset += len;
  return len;
}

Status transport_error(const CurlApi& api, CURLcode code, const std::string& what, const char* detail) {
  std::string msg = what + ": " + api.easy_strerror(code);
  if (detail && *detail) msg += " (" + redact_url(detail) + ")";
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT: return Status(ErrorCode::kTimeout, msg);
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT: return Status(ErrorCode::kInvalidArgument, msg);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE: return Status(ErrorCode::kPermissionDenied, msg);
    default: return Status(ErrorCode::kUnavailable, msg);  // resolve, connect, reset, partial body...
  }
}

std::string without_query(const std::string& url) { return url.substr(0, url.find('?')); }

}  // namespace

std::string HttpResponse::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers)
    if (k == lower_name) return v;
  return "";
}

HttpClient::HttpClient(TransferConfig config) : config_(config) {
  std::call_once(g_curl_init, [] {
    // With CURLOPT_NOSIGNAL, a peer closing a TLS connection mid-write would raise SIGPIPE and
    // kill the process; the error comes back as a failed request instead.
    std::signal(SIGPIPE, SIG_IGN);
  });
}

HttpClient::~HttpClient() {
  if (idle_.empty()) return;
  auto api = curl_api();  // loaded: these handles came from it
  for (void* h : idle_) (*api)->easy_cleanup(static_cast<CURL*>(h));
}

void* HttpClient::acquire() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  auto api = curl_api();
  return api.ok() ? (*api)->easy_init() : nullptr;
}

void HttpClient::release(void* handle) {
  std::lock_guard lock(mu_);
  idle_.push_back(handle);
}

Result<HttpResponse> HttpClient::perform(const HttpRequest& request, const std::string& what) {
  auto api = curl_api();
  if (!api.ok()) return api.error().with_context(what);
  const CurlApi& c = **api;
  CURL* curl = static_cast<CURL*>(acquire());
  if (!curl) return Status(ErrorCode::kResourceExhausted, what + ": curl_easy_init failed");
  c.easy_reset(curl);  // keeps the connection cache, drops the previous request's options
  HttpResponse response;
  Transfer t{&c, &request, &response, curl, 0, false};
  char errbuf[CURL_ERROR_SIZE] = {0};
  c.easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  c.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  c.easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  c.easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  c.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(config_.connect_timeout_ms));
  c.easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(config_.low_speed_bytes_per_s));
  c.easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(config_.low_speed_time_s));
  c.easy_setopt(curl, CURLOPT_BUFFERSIZE, 256L << 10);
  c.easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  c.easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  c.easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  c.easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  if (request.cancel != nullptr) {
    c.easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress_tick);
    c.easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
    c.easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  }
  curl_slist* headers = nullptr;
  for (const auto& [k, v] : request.headers) headers = c.slist_append(headers, (k + ": " + v).c_str());
  // We sign requests ourselves; "Expect:" (not signed) stops curl from waiting for a
  // 100-continue before every upload.
  headers = c.slist_append(headers, "Expect:");
  if (request.method == "HEAD") {
    c.easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT") {
    c.easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    c.easy_setopt(curl, CURLOPT_READFUNCTION, on_read);
    c.easy_setopt(curl, CURLOPT_READDATA, &t);
    c.easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  } else if (request.method == "POST") {
    c.easy_setopt(curl, CURLOPT_POST, 1L);
    c.easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.empty() ? "" : reinterpret_cast<const char*>(request.body.data()));
    c.easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    // The XML bodies (CompleteMultipartUpload, DeleteObjects) default to application/xml; a
    // request that names its own type (CreateMultipartUpload: the object's type) keeps it.
    const bool typed = std::any_of(request.headers.begin(), request.headers.end(),
                                   [](const auto& h) { return strcasecmp(h.first.c_str(), "content-type") == 0; });
    if (!typed) headers = c.slist_append(headers, "Content-Type: application/xml");
  } else if (request.method != "GET") {
    c.easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  c.easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

  requests_.fetch_add(1);
  int now = in_flight_.fetch_add(1) + 1;
  for (int seen = max_in_flight_.load(); now > seen && !max_in_flight_.compare_exchange_weak(seen, now);) {}
  CURLcode rc = c.easy_perform(curl);
  in_flight_.fetch_sub(1);
  c.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  c.slist_free_all(headers);
  release(curl);
  if (rc != CURLE_OK && cancelled(&t))
    return Status(ErrorCode::kCancelled, what + " (" + redact_url(without_query(request.url)) + "): cancelled");
  if (t.overflow && request.overflow_ok) return response;
  if (t.overflow)
    return Status(ErrorCode::kCorrupt, what + ": the server sent more bytes than requested (HTTP " + std::to_string(response.status) + ")");
  if (rc != CURLE_OK) return transport_error(c, rc, what + " (" + redact_url(without_query(request.url)) + ")", errbuf);
  return response;
}

std::string xml_unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    auto semi = s.find(';', i);
    if (semi == std::string_view::npos) {
      out += s[i];
      continue;
    }
    std::string_view ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp") out += '&';
    else if (ent == "lt") out += '<';
    else if (ent == "gt") out += '>';
    else if (ent == "quot") out += '"';
    else if (ent == "apos") out += '\'';
    else if (!ent.empty() && ent[0] == '#') {
      unsigned long cp = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X') ? std::strtoul(std::string(ent.substr(2)).c_str(), nullptr, 16)
                                                                            : std::strtoul(std::string(ent.substr(1)).c_str(), nullptr, 10);
      if (cp < 0x80) {
        out += static_cast<char>(cp);
      } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      }
    } else {
      out += s.substr(i, semi - i + 1);
    }
    i = semi;
  }
  return out;
}

std::string xml_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<std::string_view> xml_elements(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  size_t pos = 0;
  for (;;) {
    auto a = xml.find(open, pos);
    if (a == std::string_view::npos) break;
    a += open.size();
    auto b = xml.find(close, a);
    if (b == std::string_view::npos) break;
    out.push_back(xml.substr(a, b - a));
    pos = b + close.size();
  }
  return out;
}

std::string xml_value(std::string_view xml, std::string_view tag) {
  auto all = xml_elements(xml, tag);
  return all.empty() ? "" : xml_unescape(all.front());
}

namespace {

constexpr size_t kMaxServerText = 256;

bool plain_code(std::string_view code) {
  for (char c : code) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  }
  return code.size() <= 64;
}

}  // namespace

Status status_from_http(const HttpResponse& response, const std::string& what) {
  std::string code = xml_value(response.body, "Code");
  std::string message = xml_value(response.body, "Message");
  std::string text = what + ": HTTP " + std::to_string(response.status);
  // The body is the server's text: quoted when it is more than a plain S3 code, so a reply with
  // newlines or escape sequences can neither draw fake lines nor rewrite the terminal or log.
  if (!code.empty()) text += " " + (plain_code(code) ? code : quote_text(code, kMaxServerText));
  if (!message.empty()) text += " (" + quote_text(message, kMaxServerText) + ")";
  long s = response.status;
  ErrorCode ec = ErrorCode::kInvalidArgument;
  if (s == 404) ec = ErrorCode::kNotFound;
  else if (s == 401 || s == 403) ec = ErrorCode::kPermissionDenied;
  else if (s == 412) ec = ErrorCode::kPreconditionFailed;
  else if (s == 501) ec = ErrorCode::kUnsupported;
  else if (s == 408 || s == 429 || s >= 500 || code == "RequestTimeout" || code == "SlowDown") ec = ErrorCode::kUnavailable;
  if (code == "RequestTimeTooSkewed") text += "; check this machine's clock";
  return Status(ec, text);
}

}  // namespace lazycache::remote
