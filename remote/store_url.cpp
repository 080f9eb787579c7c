// SPDX-License-Identifier: MIT
#include "remote/store_url.h"

#include <unistd.h>

#include <cctype>
#include <climits>

namespace lazycache::remote {
namespace {

Status bad_url(std::string_view url, const std::string& why) {
  // Never echo a query (it may hold a presigned signature or token) or a password.
  std::string shown = redact_url(url.substr(0, url.find('?')));
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

constexpr std::string_view kRedacted = "***";

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Lower case after %-decoding: "X%2DAmz%2DSignature" must not slip past as an unknown name.
std::string decoded_lower(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%' && i + 2 < s.size()) {
      int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        c = static_cast<char>(hi * 16 + lo);
        i += 2;
      }
    }
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// "a=1&sig=2;b" with the values of secret parameters replaced.
std::string redact_params(std::string_view params) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t sep = params.find_first_of("&;", pos);
    std::string_view param = params.substr(pos, sep == std::string_view::npos ? std::string_view::npos : sep - pos);
    const size_t eq = param.find('=');
    // A value already "***" is kept as it is: redacting twice changes nothing.
    if (eq != std::string_view::npos && is_secret_param(param.substr(0, eq)) && param.substr(eq + 1).rfind(kRedacted, 0) != 0) {
      out += param.substr(0, eq + 1);
      out += kRedacted;
    } else {
      out += param;
    }
    if (sep == std::string_view::npos) return out;
    out += params[sep];
    pos = sep + 1;
  }
}

// One URL from just after "://" to its end: [userinfo@]authority[/path][?query][#fragment].
std::string redact_after_scheme(std::string_view url) {
  std::string out;
  const size_t authority_end = url.find_first_of("/?#");
  std::string_view authority = url.substr(0, authority_end);
  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    out += kRedacted;
    out += authority.substr(at);
  } else {
    out += authority;
  }
  if (authority_end == std::string_view::npos) return out;
  std::string_view rest = url.substr(authority_end);
  const size_t q = rest.find_first_of("?#");
  out += rest.substr(0, q);  // the path
  if (q == std::string_view::npos) return out;
  rest = rest.substr(q);
  const size_t hash = rest.find('#');
  if (hash > 0) {  // a query, up to the fragment if any
    out += '?';
    out += redact_params(rest.substr(1, hash == std::string_view::npos ? std::string_view::npos : hash - 1));
  }
  if (hash != std::string_view::npos) {
    out += '#';
    out += redact_params(rest.substr(hash + 1));
  }
  return out;
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

bool is_secret_param(std::string_view name) {
  // Substrings, not a list of exact names: a provider's next variant (X-Goog-Security-Token,
  // OSSAccessKeyId, api_key, access_token, ...) is redacted too. Over-redacting costs nothing.
  static constexpr std::string_view kSecretParts[] = {"sig", "credential", "token", "secret",   "password", "passwd",
                                                      "pwd", "key",        "auth",  "accessid", "session"};
  const std::string n = decoded_lower(name);
  for (std::string_view part : kSecretParts) {
    if (n.find(part) != std::string::npos) return true;
  }
  return false;
}

std::string redact_url(std::string_view text) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t scheme_end = text.find("://", pos);
    if (scheme_end == std::string_view::npos) break;
    out += text.substr(pos, scheme_end + 3 - pos);
    // A URL ends at whitespace or a quote: each URL in a message or log line is redacted.
    size_t url_end = text.find_first_of(" \t\r\n'\"<>", scheme_end + 3);
    if (url_end == std::string_view::npos) url_end = text.size();
    out += redact_after_scheme(text.substr(scheme_end + 3, url_end - scheme_end - 3));
    pos = url_end;
  }
  out += text.substr(pos);
  return out;
}

std::string StoreUrl::display() const {
  switch (kind) {
    case Kind::kLocalDir: return "file://" + dir;
    case Kind::kS3: return "s3://" + bucket + (prefix.empty() ? "" : "/" + prefix);
    case Kind::kHttp: return redact_url(http_base);
  }
  return "?";
}

Result<StoreUrl> parse_store_url(std::string_view url) {
  StoreUrl out;
  if (url.empty()) return bad_url(url, "empty");
  auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) {
    if (looks_like_mistyped_url(url))
      return bad_url(url,
                     "looks like a mistyped URL (the forms are a path, file:///dir, s3://bucket/prefix, "
                     "http(s)://host/path; write ./" +
                         std::string(url.substr(0, url.find('?'))) + " for a directory of that name)");
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
      bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || (c >= 'A' && c <= 'Z');
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
    return Status(ErrorCode::kInvalidArgument, "endpoint '" + redact_url(url) + "': expected http(s)://host[:port]");
  HttpEndpoint ep;
  ep.scheme = std::string(url.substr(0, scheme_end));
  if (ep.scheme != "http" && ep.scheme != "https")
    return Status(ErrorCode::kInvalidArgument, "endpoint '" + redact_url(url) + "': scheme must be http or https");
  std::string_view rest = url.substr(scheme_end + 3);
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty() || rest.find('/') != std::string_view::npos || rest.find('?') != std::string_view::npos)
    return Status(ErrorCode::kInvalidArgument, "endpoint '" + redact_url(url) + "': expected http(s)://host[:port] with no path");
  ep.host = std::string(rest);
  return ep;
}

}  // namespace lazycache::remote
