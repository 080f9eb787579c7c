// SPDX-License-Identifier: MIT
#include "remote/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <ctime>

namespace lazycache::remote {
namespace {

std::string hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Trims and collapses runs of spaces, as the canonical header form requires.
std::string canonical_value(std::string_view v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::string scope_of(const SignRequest& r) { return r.amz_date.substr(0, 8) + "/" + r.region + "/" + r.service + "/aws4_request"; }

}  // namespace

std::string hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  unsigned char out[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out);
  return hex(std::string_view(reinterpret_cast<char*>(out), sizeof out));
}

std::string uri_encode(std::string_view s, bool encode_slash) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && !encode_slash)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

std::string amz_date(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string canonical_query(const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<std::pair<std::string, std::string>> enc;
  for (const auto& [k, v] : query) enc.emplace_back(uri_encode(k, true), uri_encode(v, true));
  std::sort(enc.begin(), enc.end());
  std::string out;
  for (const auto& [k, v] : enc) {
    if (!out.empty()) out += '&';
    out += k + "=" + v;
  }
  return out;
}

std::string canonical_request(const SignRequest& r, std::string* signed_headers) {
  std::vector<std::pair<std::string, std::string>> hs;
  for (const auto& [k, v] : r.headers) hs.emplace_back(lower(k), canonical_value(v));
  std::sort(hs.begin(), hs.end());
  std::string headers, names;
  for (const auto& [k, v] : hs) {
    headers += k + ":" + v + "\n";
    if (!names.empty()) names += ';';
    names += k;
  }
  if (signed_headers) *signed_headers = names;
  return r.method + "\n" + r.path + "\n" + canonical_query(r.query) + "\n" + headers + "\n" + names + "\n" + r.payload_hash;
}

std::string string_to_sign(const SignRequest& r, const std::string& canonical) {
  return "AWS4-HMAC-SHA256\n" + r.amz_date + "\n" + scope_of(r) + "\n" + sha256_hex(canonical);
}

std::string signature(const SignRequest& r, const std::string& secret, const std::string& to_sign) {
  std::string k = hmac("AWS4" + secret, r.amz_date.substr(0, 8));
  k = hmac(k, r.region);
  k = hmac(k, r.service);
  k = hmac(k, "aws4_request");
  return hex(hmac(k, to_sign));
}

std::string authorization_header(const SignRequest& r, const AwsCredentials& creds) {
  std::string names;
  std::string canonical = canonical_request(r, &names);
  std::string sig = signature(r, creds.secret_access_key, string_to_sign(r, canonical));
  return "AWS4-HMAC-SHA256 Credential=" + creds.access_key_id + "/" + scope_of(r) + ", SignedHeaders=" + names + ", Signature=" + sig;
}

std::string presign_query(const SignRequest& request, const AwsCredentials& creds, int expires_s) {
  SignRequest r = request;
  r.payload_hash = std::string(kUnsignedPayload);
  std::string names;
  canonical_request(r, &names);  // only for the signed header list
  r.query.emplace_back("X-Amz-Algorithm", "AWS4-HMAC-SHA256");
  r.query.emplace_back("X-Amz-Credential", creds.access_key_id + "/" + scope_of(r));
  r.query.emplace_back("X-Amz-Date", r.amz_date);
  r.query.emplace_back("X-Amz-Expires", std::to_string(expires_s));
  if (!creds.session_token.empty()) r.query.emplace_back("X-Amz-Security-Token", creds.session_token);
  r.query.emplace_back("X-Amz-SignedHeaders", names);
  std::string sig = signature(r, creds.secret_access_key, string_to_sign(r, canonical_request(r)));
  return canonical_query(r.query) + "&X-Amz-Signature=" + sig;
}

}  // namespace lazycache::remote
