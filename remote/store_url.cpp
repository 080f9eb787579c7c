// SPDX-License-Identifier: MIT
#include "remote/store_url.h"

#include <unistd.h>

#include <climits>

namespace lazycache::remote {
namespace {

Status bad_url(std::string_view url, const std::string& why) {
  // Never echo a query: it may hold a presigned signature or token.
  std::string shown(url.substr(0, url.find('?')));
  return Status(ErrorCode::kInvalidArgument, "store URL '" + shown + "': " + why);
}

std::string trim_slashes(std::string_view s) {
  while (!s.empty() && s.front() == '/') s.remove_prefix(1);
  while (!s.empty() && s.back() == '/') s.remove_suffix(1);
  return std::string(s);
}

Result<std::string> absolute_dir(std::string_view url, std::string_view path) {
  if (path.empty()) return bad_url(url, "empty directory");
  std::string p(path);
  if (p.front() != '/') {
    char cwd[PATH_MAX];
    if (!::getcwd(cwd, sizeof cwd)) return errno_status("getcwd");
    p = std::string(cwd) + "/" + p;
  }
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// A plain path whose first component looks like a URL scheme ("s3:/bucket", "file:/tmp/x",
// "https:host") is almost always a mistyped URL. Taking it as a directory would put the cache in
// the job's working directory and report success, so it is refused; "./s3:x" still names a
// directory of that name for whoever really wants one.
bool looks_like_mistyped_url(std::string_view url) {
  auto colon = url.find(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view scheme = url.substr(0, colon);
  if (scheme.find('/') != std::string_view::npos) return false;
  auto is_alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (!is_alpha(scheme.front())) return false;
  for (char c : scheme)
    if (!is_alpha(c) && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.') return false;
  return true;
}

}  // namespace

std::string StoreUrl::display() const {
  switch (kind) {
    case Kind::kLocalDir: return "file://" + dir;
    case Kind::kS3: return "s3://" + bucket + (prefix.empty() ? "" : "/" + prefix);
    case Kind::kHttp: return http_base;
  }
  return "?";
}

Result<StoreUrl> parse_store_url(std::string_view url) {
  StoreUrl out;
  if (url.empty()) return bad_url(url, "empty");
  auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) {
    if (looks_like_mistyped_url(url))
      return bad_url(url, "looks like a mistyped URL (the forms are a path, file:///dir, s3://bucket/prefix, "
                          "http(s)://host/path; write ./" + std::string(url.substr(0, url.find('?'))) +
                          " for a directory of that name)");
    out.kind = StoreUrl::Kind::kLocalDir;
    LC_ASSIGN_OR_RETURN(out.dir, absolute_dir(url, url));
    return out;
  }
  std::string_view scheme = url.substr(0, scheme_end);
  std::string_view rest = url.substr(scheme_end + 3);
  if (scheme == "file") {
    if (rest.empty() || rest.front() != '/') return bad_url(url, "file:// needs an absolute path (file:///dir)");
    out.kind = StoreUrl::Kind::kLocalDir;
    LC_ASSIGN_OR_RETURN(out.dir, absolute_dir(url, rest));
    return out;
  }
  if (scheme == "s3") {
    out.kind = StoreUrl::Kind::kS3;
    auto slash = rest.find('/');
    out.bucket = std::string(rest.substr(0, slash));
    if (slash != std::string_view::npos) out.prefix = trim_slashes(rest.substr(slash + 1));
    if (out.bucket.empty()) return bad_url(url, "no bucket (s3://bucket/prefix)");
    if (out.bucket.size() < 3 || out.bucket.size() > 63) return bad_url(url, "bucket names have 3 to 63 characters");
    for (char c : out.bucket) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                (c >= 'A' && c <= 'Z');
      if (!ok) return bad_url(url, "bad character in bucket name");
    }
    if (url.find('?') != std::string_view::npos) return bad_url(url, "s3:// URLs take no query");
    return out;
  }
  if (scheme == "http" || scheme == "https") {
    out.kind = StoreUrl::Kind::kHttp;
    auto q = rest.find('?');
    std::string_view before_query = rest.substr(0, q);
    if (q != std::string_view::npos) out.http_query = std::string(rest.substr(q + 1));
    if (before_query.empty() || before_query.front() == '/') return bad_url(url, "no host");
    while (!before_query.empty() && before_query.back() == '/') before_query.remove_suffix(1);
    out.http_base = std::string(scheme) + "://" + std::string(before_query);
    return out;
  }
  return bad_url(url, "unknown scheme '" + std::string(scheme) + "' (use a path, file://, s3:// or http(s)://)");
}

Result<HttpEndpoint> parse_endpoint(std::string_view url) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos)
    return Status(ErrorCode::kInvalidArgument, "endpoint '" + std::string(url) + "': expected http(s)://host[:port]");
  HttpEndpoint ep;
  ep.scheme = std::string(url.substr(0, scheme_end));
  if (ep.scheme != "http" && ep.scheme != "https")
    return Status(ErrorCode::kInvalidArgument, "endpoint '" + std::string(url) + "': scheme must be http or https");
  std::string_view rest = url.substr(scheme_end + 3);
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty() || rest.find('/') != std::string_view::npos || rest.find('?') != std::string_view::npos)
    return Status(ErrorCode::kInvalidArgument, "endpoint '" + std::string(url) + "': expected http(s)://host[:port] with no path");
  ep.host = std::string(rest);
  return ep;
}

}  // namespace lazycache::remote
