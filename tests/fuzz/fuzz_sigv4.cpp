// SPDX-License-Identifier: MIT
// Fuzz target: SigV4 signing of untrusted object keys, queries and headers (remote/sigv4.h), and
// the AWS credentials/config files and environment (remote/aws_config.h).
//
// Input: NUL-separated fields (tests/fuzz/fuzz_fields.h). Field 0 picks the mode:
//   "config": 1 credentials file, 2 config file, 3 AWS_PROFILE, 4.. NAME=value environment;
//   anything else, signing: 1 method, 2 object key, 3 region, 4 access key id, 5 secret (after a
//     fixed marker), 6 session token (after a marker; empty = none), 7 unix time, 8 expiry,
//     9.. "name:value" (a header; skipped unless the name is an HTTP token) or "name=value" (a
//     query parameter).
// In config mode "$S" and "$T" in the files and the environment values stand for the secret and
// the token markers (not in the profile name, which errors name on purpose).
// Secrets are built around fixed markers so "the secret never appears in printable output" is
// a substring test that cannot match by chance (skipped when the input spells a marker itself).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "remote/aws_config.h"
#include "remote/sigv4.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_fields.h"

using namespace lazycache;
using namespace lazycache::remote;

namespace {

constexpr std::string_view kSecretMark = "wJalrXUtnFEMI/K7MDENG+bPxRfiCY";
constexpr std::string_view kTokenMark = "FwoGZXIvYXdzEJr//////////wEaDFUZZTOKEN";

[[noreturn]] void fail(const std::string& what) { fuzz::fail(what.c_str(), Status()); }

bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

bool is_unreserved(unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// uri_encode's output is plain URL text (nothing that could end the path or start a query, no
// control bytes) and decodes back to its input.
void check_uri_encode(std::string_view in, bool encode_slash) {
  std::string enc = uri_encode(in, encode_slash);
  std::string back;
  for (size_t i = 0; i < enc.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(enc[i]);
    if (c == '%') {
      if (i + 2 >= enc.size()) fail("uri_encode: truncated escape");
      int hi = hex_value(enc[i + 1]), lo = hex_value(enc[i + 2]);
      if (hi < 0 || lo < 0) fail("uri_encode: escape is not two upper-case hex digits");
      unsigned char decoded = static_cast<unsigned char>(hi * 16 + lo);
      if (is_unreserved(decoded) || (decoded == '/' && !encode_slash)) fail("uri_encode: escaped an unreserved byte");
      back += static_cast<char>(decoded);
      i += 2;
    } else if (is_unreserved(c) || (c == '/' && !encode_slash)) {
      back += static_cast<char>(c);
    } else {
      fail("uri_encode: raw byte outside the unreserved set");
    }
  }
  if (back != in) fail("uri_encode does not decode back to its input");
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

bool lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

// Every parameter of an encoded query is one name=value pair: no parameter can smuggle another.
void check_query_shape(std::string_view qs, size_t expected_params, const char* what) {
  if (expected_params == 0) {
    if (!qs.empty()) fail(std::string(what) + ": parameters out of nothing");
    return;
  }
  auto parts = split(qs, '&');
  if (parts.size() != expected_params) fail(std::string(what) + ": parameter count changed");
  for (auto p : parts)
    if (std::count(p.begin(), p.end(), '=') != 1) fail(std::string(what) + ": a parameter without exactly one '='");
}

void fuzz_signing(const fuzz::Fields& f) {
  const bool marks_in_input = contains(f.raw(), kSecretMark) || contains(f.raw(), kTokenMark);
  std::string key = f.get(2);
  check_uri_encode(key, false);
  check_uri_encode(key, true);
  check_uri_encode(f.raw(), false);
  check_uri_encode(f.raw(), true);

  AwsCredentials creds{f.get(4), std::string(kSecretMark) + f.get(5), f.get(6).empty() ? "" : std::string(kTokenMark) + f.get(6)};
  std::vector<std::pair<std::string, std::string>> query, headers;
  for (size_t i = 9; i < f.size(); ++i) {
    std::string p = f.get(i);
    if (size_t colon = p.find(':'); colon != std::string::npos) {
      // Only names HTTP allows (RFC 9110 tokens): the signer trusts its callers' header names.
      if (is_token(p.substr(0, colon))) headers.emplace_back(p.substr(0, colon), p.substr(colon + 1));
    } else {
      size_t eq = p.find('=');
      query.emplace_back(p.substr(0, eq), eq == std::string::npos ? "" : p.substr(eq + 1));
    }
  }

  std::string qs = canonical_query(query);
  check_query_shape(qs, query.size(), "canonical_query");
  auto reversed = query;
  std::reverse(reversed.begin(), reversed.end());
  if (canonical_query(reversed) != qs) fail("canonical_query depends on the parameters' order");

  uint64_t t = fuzz::to_u64(f.get(7));
  std::string date = amz_date(static_cast<int64_t>(t));
  if (t <= 253402300799ULL) {  // up to year 9999: the fixed-width form servers expect
    bool shaped = date.size() == 16 && date[8] == 'T' && date[15] == 'Z';
    for (size_t i = 0; shaped && i < 15; ++i) shaped = i == 8 || (date[i] >= '0' && date[i] <= '9');
    if (!shaped) fail("amz_date is not YYYYMMDDTHHMMSSZ: '" + date + "'");
  }

  // The request as S3ObjectStore builds it.
  SignRequest r;
  r.method = f.get(1);
  r.path = "/bucket/" + uri_encode(key, false);
  r.query = query;
  r.headers = headers;
  r.headers.emplace_back("host", "bucket.example.com");
  r.headers.emplace_back("x-amz-date", date);
  r.payload_hash = std::string(kEmptyPayloadHash);
  r.headers.emplace_back("x-amz-content-sha256", r.payload_hash);
  if (!creds.session_token.empty()) r.headers.emplace_back("x-amz-security-token", creds.session_token);
  r.amz_date = date;
  r.region = f.get(3);

  std::string names;
  std::string canonical = canonical_request(r, &names);
  if (canonical != canonical_request(r)) fail("canonical_request is not deterministic");
  if (canonical.rfind(r.method + "\n" + r.path + "\n" + qs + "\n", 0) != 0)
    fail("canonical_request does not start with method, path, query");
  auto name_list = split(names, ';');
  if (name_list.size() != r.headers.size()) fail("signed header list lost or gained a header");
  if (!std::is_sorted(name_list.begin(), name_list.end())) fail("signed header names not sorted");
  for (auto n : name_list)
    if (std::any_of(n.begin(), n.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) fail("signed header name not lower case");

  std::string auth = authorization_header(r, creds);
  if (auth != authorization_header(r, creds)) fail("authorization_header is not deterministic");
  std::string prefix = "AWS4-HMAC-SHA256 Credential=" + creds.access_key_id + "/";
  const std::string sig_tag = ", Signature=";
  if (auth.rfind(prefix, 0) != 0) fail("Authorization does not start with the credential");
  if (auth.size() < prefix.size() + sig_tag.size() + 64 || auth.compare(auth.size() - 64 - sig_tag.size(), sig_tag.size(), sig_tag) != 0 ||
      !lower_hex(std::string_view(auth).substr(auth.size() - 64)))
    fail("Authorization does not end with a 64-digit hex signature");
  AwsCredentials other = creds;
  other.secret_access_key[0] = other.secret_access_key[0] == 'w' ? 'x' : 'w';
  if (authorization_header(r, other) == auth) fail("the signature does not depend on the secret key");
  if (!marks_in_input && (contains(auth, kSecretMark) || contains(auth, kTokenMark)))
    fail("Authorization header shows the secret key or the session token");

  int expires = static_cast<int>(fuzz::to_u64(f.get(8)) % 604801);
  std::string presigned = presign_query(r, creds, expires);
  if (!marks_in_input && contains(presigned, kSecretMark)) fail("presigned query shows the secret key");
  const std::string psig = "&X-Amz-Signature=";
  if (presigned.size() < psig.size() + 64 || presigned.compare(presigned.size() - 64 - psig.size(), psig.size(), psig) != 0 ||
      !lower_hex(std::string_view(presigned).substr(presigned.size() - 64)))
    fail("presigned query does not end with a 64-digit hex signature");
  check_query_shape(presigned, query.size() + 5 + (creds.session_token.empty() ? 0 : 1) + 1, "presign_query");
  // The token travels in the presigned query exactly once, by design (the URL is the secret);
  // the caller's own parameters may carry the same name and are counted apart.
  const std::string token_param = "X-Amz-Security-Token=";
  size_t callers = 0, seen = 0;
  for (const auto& [k, v] : query) callers += uri_encode(k, true) + "=" == token_param;
  bool token_found = false;
  for (auto part : split(presigned, '&')) {
    if (part.rfind(token_param, 0) != 0) continue;
    ++seen;
    token_found |= !creds.session_token.empty() && part == token_param + uri_encode(creds.session_token, true);
  }
  if (seen != callers + (creds.session_token.empty() ? 0 : 1) || token_found == creds.session_token.empty())
    fail("presigned query and the session token disagree");
}

// ---- config mode ----

const char* const kEnvNames[] = {"AWS_ACCESS_KEY_ID",  "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                                 "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3",   "AWS_ENDPOINT_URL",  "AWS_PROFILE"};

std::string expand(std::string s) {
  for (auto [from, to] : {std::pair{std::string_view("$S"), kSecretMark}, std::pair{std::string_view("$T"), kTokenMark}}) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  }
  return s;
}

// The two files, as memfds named through /proc/self/fd: rewritten for every input without
// touching a disk.
struct ConfigFiles {
  int credentials_fd = memfd_create("credentials", MFD_CLOEXEC);
  int config_fd = memfd_create("config", MFD_CLOEXEC);
  std::string credentials = "/proc/self/fd/" + std::to_string(credentials_fd);
  std::string config = "/proc/self/fd/" + std::to_string(config_fd);
  ConfigFiles() {
    if (credentials_fd < 0 || config_fd < 0) std::abort();
  }
  static void write(int fd, const std::string& text) {
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) std::abort();
  }
};

bool trimmed(std::string_view v) { return v.empty() || (v.find_first_of(" \t\r") != 0 && v.find_last_of(" \t\r") != v.size() - 1); }

// The process environment swapped for a built one while alive. setenv() would leak a string per
// change by design, which makes libFuzzer run a leak check after every input (30x slower); and
// the real environment is back before any rule can abort (the symbolizer needs PATH).
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(const std::map<std::string, std::string>& vars) : saved_(environ) {
    for (const auto& [k, v] : vars) entries_.push_back(k + "=" + v);
    for (auto& e : entries_) pointers_.push_back(e.data());
    pointers_.push_back(nullptr);
    environ = pointers_.data();
  }
  ~ScopedEnvironment() { environ = saved_; }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  char** saved_;
  std::vector<std::string> entries_;
  std::vector<char*> pointers_;
};

struct ConfigResults {
  Result<AwsCredentials> creds{ErrorCode::kInternal, "not run"}, again{ErrorCode::kInternal, "not run"};
  std::string region, region_again, endpoint, endpoint_again;
  Result<AwsCredentials> source_first{ErrorCode::kInternal, "not run"};
  bool reload_changed = false;
};

void fuzz_config(const fuzz::Fields& f) {
  static ConfigFiles files;
  const bool marks_in_input = contains(f.raw(), kSecretMark) || contains(f.raw(), kTokenMark);
  std::string cred_text = expand(f.get(1)), config_text = expand(f.get(2));
  ConfigFiles::write(files.credentials_fd, cred_text);
  ConfigFiles::write(files.config_fd, config_text);
  std::map<std::string, std::string> env{{"HOME", "/nonexistent"},  // no ~/.aws: only the files above count
                                         {"AWS_SHARED_CREDENTIALS_FILE", files.credentials},
                                         {"AWS_CONFIG_FILE", files.config}};
  // The profile name is echoed in errors by design, so it never stands for a secret.
  if (std::string p = f.get(3); !p.empty()) env["AWS_PROFILE"] = p;
  for (size_t i = 4; i < f.size(); ++i) {
    std::string kv = f.get(i);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string name = kv.substr(0, eq);
    if (std::find(std::begin(kEnvNames), std::end(kEnvNames), name) != std::end(kEnvNames))
      env[name] = name == "AWS_PROFILE" ? kv.substr(eq + 1) : expand(kv.substr(eq + 1));
  }
  auto env_value = [&env](const char* name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };

  ConfigResults r;
  {
    ScopedEnvironment scoped(env);
    r.creds = load_aws_credentials();
    r.again = load_aws_credentials();
    r.region = aws_region();
    r.region_again = aws_region();
    r.endpoint = aws_endpoint_url();
    r.endpoint_again = aws_endpoint_url();
    CredentialSource source(load_aws_credentials);
    r.source_first = source.current();
    r.reload_changed = source.reload();
  }

  const auto& creds = r.creds;
  if (creds.ok() != r.again.ok()) fail("load_aws_credentials is not deterministic");
  if (!creds.ok()) {
    if (creds.error().code() != ErrorCode::kPermissionDenied) fuzz::fail("load_aws_credentials", creds.error());
    if (creds.error().to_string() != r.again.error().to_string()) fail("load_aws_credentials error is not deterministic");
    if (!marks_in_input && (contains(creds.error().to_string(), kSecretMark) || contains(creds.error().to_string(), kTokenMark)))
      fail("credentials error shows the secret key or the session token");
  } else {
    if (creds->access_key_id != r.again->access_key_id || creds->secret_access_key != r.again->secret_access_key ||
        creds->session_token != r.again->session_token)
      fail("load_aws_credentials is not deterministic");
    if (creds->empty()) fail("load_aws_credentials accepted an empty key id or secret");
    std::string env_id = env_value("AWS_ACCESS_KEY_ID"), env_secret = env_value("AWS_SECRET_ACCESS_KEY");
    if (!env_id.empty() && !env_secret.empty()) {
      if (creds->access_key_id != env_id || creds->secret_access_key != env_secret ||
          creds->session_token != env_value("AWS_SESSION_TOKEN"))
        fail("the environment's credentials did not win");
    } else {
      for (const std::string& v : {creds->access_key_id, creds->secret_access_key, creds->session_token}) {
        if (!trimmed(v) || contains(v, "\n")) fail("a credential from a file is not trimmed to its line");
        if (!v.empty() && !contains(cred_text, v) && !contains(config_text, v)) fail("a credential from nowhere");
      }
    }
  }

  if (r.region.empty() || r.region != r.region_again) fail("aws_region is empty or not deterministic");
  for (const char* n : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    if (std::string v = env_value(n); !v.empty()) {
      if (r.region != v) fail(std::string("aws_region ignored ") + n);
      break;
    }
  }
  if (r.endpoint != r.endpoint_again) fail("aws_endpoint_url is not deterministic");
  for (const char* n : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
    if (std::string v = env_value(n); !v.empty()) {
      if (r.endpoint != v) fail(std::string("aws_endpoint_url ignored ") + n);
      break;
    }
  }
  if (r.source_first.ok() != creds.ok()) fail("CredentialSource::current disagrees with load_aws_credentials");
  if (r.reload_changed) fail("reload reported a change when nothing changed");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Fields f(data, size);
  if (f.get(0) == "config") fuzz_config(f);
  else fuzz_signing(f);
  return 0;
}
