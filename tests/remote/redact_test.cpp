// SPDX-License-Identifier: MIT
// What remote/ lets out into messages, logs and files: store URLs without passwords or
// signatures (redact_url), and a server's error text quoted, never raw (status_from_http).
#include <catch2/catch.hpp>
#include <string>

#include "remote/cache_keys.h"
#include "remote/http_client.h"
#include "remote/http_object_store.h"
#include "remote/store_url.h"

using namespace lazycache;
using namespace lazycache::remote;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("redact_url removes userinfo and keeps where the URL points", "[unit]") {
  CHECK(redact_url("http://user:pa55@host:8080/caches/k?x=1") == "http://***@host:8080/caches/k?x=1");
  CHECK(redact_url("https://ghp_token123@github.example/raw") == "https://***@github.example/raw");
  CHECK(redact_url("http://u:p@ss@host/p") == "http://***@host/p");         // the last '@' ends userinfo
  CHECK(redact_url("http://host/@scope/pkg") == "http://host/@scope/pkg");  // '@' in a path is no userinfo
  CHECK(redact_url("http://u:p@host") == "http://***@host");
  CHECK(redact_url("s3://my-bucket/ci") == "s3://my-bucket/ci");
  CHECK(redact_url("/var/cache/store") == "/var/cache/store");
  CHECK(redact_url("") == "");
}

TEST_CASE("redact_url removes the signature and credential parameters of presigned URLs", "[unit]") {
  // AWS SigV4: the signature, the access key id in the credential scope, the session token.
  const std::string v4 = redact_url(
      "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20260101%2Fus-east-1"
      "&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Security-Token=FwoGZXIvYXdzSESSION"
      "&X-Amz-Signature=abcdef0123456789");
  CHECK(v4 ==
        "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***"
        "&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=***&X-Amz-Security-Token=***"
        "&X-Amz-Signature=***");
  // AWS SigV2 (also Alibaba OSS), GCS V4 and V2, Azure SAS, CloudFront.
  const std::string v2 = redact_url(
      "https://b.s3.amazonaws.com/k?AWSAccessKeyId=AKIAX&Expires=1700000000&Signature=vjbyPx%2B&x-amz-security-token=TOK");
  CHECK(v2 == "https://b.s3.amazonaws.com/k?AWSAccessKeyId=***&Expires=1700000000&Signature=***&x-amz-security-token=***");
  const std::string gcs = redact_url(
      "https://storage.googleapis.com/b/k?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=sa%40p.iam"
      "&X-Goog-Date=20260101T000000Z&X-Goog-Expires=900&X-Goog-Signature=deadbeef");
  CHECK(gcs ==
        "https://storage.googleapis.com/b/k?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=***"
        "&X-Goog-Date=20260101T000000Z&X-Goog-Expires=900&X-Goog-Signature=***");
  CHECK(redact_url("https://storage.googleapis.com/b/k?GoogleAccessId=sa%40p&Expires=1&Signature=abc") ==
        "https://storage.googleapis.com/b/k?GoogleAccessId=***&Expires=1&Signature=***");
  const std::string sas = redact_url("https://acct.blob.core.windows.net/c/k?sv=2022-11-02&se=2026-01-01&sr=b&sp=r&sig=S3cr3t%3D");
  CHECK(sas == "https://acct.blob.core.windows.net/c/k?sv=2022-11-02&se=2026-01-01&sr=b&sp=r&sig=***");
  CHECK(redact_url("https://d.cloudfront.net/k?Expires=1&Signature=abc&Key-Pair-Id=K2J") ==
        "https://d.cloudfront.net/k?Expires=1&Signature=***&Key-Pair-Id=***");
  // Generic tokens and keys, any case, %-encoded names, ';' separators, fragments.
  CHECK(redact_url("http://h/k?token=t1&ACCESS_TOKEN=t2&api_key=k&password=p&a=1") ==
        "http://h/k?token=***&ACCESS_TOKEN=***&api_key=***&password=***&a=1");
  CHECK(redact_url("http://h/k?X%2DAmz%2DSignature=abc") == "http://h/k?X%2DAmz%2DSignature=***");
  CHECK(redact_url("http://h/k?a=1;sig=abc") == "http://h/k?a=1;sig=***");
  CHECK(redact_url("http://h/k#access_token=abc&state=1") == "http://h/k#access_token=***&state=1");
  CHECK(redact_url("http://h/k?sig=abc#token=def") == "http://h/k?sig=***#token=***");
  CHECK(redact_url("http://h/k?token") == "http://h/k?token");  // no value: nothing to hide
}

TEST_CASE("redact_url redacts every URL in a message or option", "[unit]") {
  CHECK(redact_url("--store=http://u:p@h/k?sig=1") == "--store=http://***@h/k?sig=***");
  const std::string msg = redact_url("GET http://u:pw@a/x?sig=s1 from 'http://b/y?token=s2': HTTP 403");
  CHECK(msg == "GET http://***@a/x?sig=*** from 'http://b/y?token=***': HTTP 403");
  CHECK(!has(msg, "pw"));
  CHECK(!has(msg, "s1"));
  CHECK(!has(msg, "s2"));
  // A value runs to the end of the URL (whitespace or a quote): a ')' may be part of a secret.
  CHECK(redact_url("(http://h/k?sig=a)b) x") == "(http://h/k?sig=*** x");
  // Redacting twice changes nothing: messages built from redacted URLs go through it again.
  const std::string once = redact_url("GET x (http://u:p@h/k?token=t&a=1): failed");
  CHECK(redact_url(once) == once);
}

TEST_CASE("store URLs never show their secrets", "[unit]") {
  auto p = parse_store_url("http://user:hunter2@127.0.0.1:1/e.lcz?X-Amz-Signature=s1gn");
  REQUIRE(p.ok());
  CHECK(p->http_base == "http://user:hunter2@127.0.0.1:1/e.lcz");  // the request still needs it
  CHECK(p->display() == "http://***@127.0.0.1:1/e.lcz");
  HttpObjectStore store(p->http_base, p->http_query);
  CHECK(store.describe() == "http://***@127.0.0.1:1/e.lcz");
  // Nothing listens on port 1: the transport error names the URL, redacted.
  std::byte buf[16];
  auto r = store.get_range(RangeRequest{"k", 0, sizeof buf, ""}, buf);
  REQUIRE(!r.ok());
  CHECK(!has(r.error().to_string(), "hunter2"));
  CHECK(!has(r.error().to_string(), "s1gn"));
  CHECK(has(r.error().to_string(), "127.0.0.1:1"));
  for (const char* bad : {"ftp://user:hunter2@h/x", "gopher://user:hunter2@h/x?token=t"}) {
    auto e = parse_store_url(bad);
    INFO(bad);
    REQUIRE(!e.ok());
    CHECK(!has(e.error().message(), "hunter2"));
  }
  auto ep = parse_endpoint("http://user:hunter2@h:9000/path");
  REQUIRE(!ep.ok());
  CHECK(!has(ep.error().message(), "hunter2"));
}

TEST_CASE("a server's error text is quoted: no raw control byte, one line", "[unit]") {
  HttpResponse r;
  r.status = 500;
  r.body =
      "<Error><Code>Internal\x1b[2JError\nlazycache: fake line</Code>"
      "<Message>We failed\n\x1b[31mlazycache: all good&#10;really</Message></Error>";
  const std::string text = status_from_http(r, "GET http://h/k").to_string();
  INFO(text);
  CHECK(!has(text, "\x1b"));
  CHECK(!has(text, "\n"));
  CHECK(has(text, "'Internal\\x1b[2JError\\nlazycache: fake line'"));
  CHECK(has(text, "('We failed\\n\\x1b[31mlazycache: all good\\nreally')"));
  // A plain S3 code stays as it was.
  r.status = 403;
  r.body = "<Error><Code>ExpiredToken</Code><Message>The token expired</Message></Error>";
  CHECK(has(status_from_http(r, "GET x").to_string(), "HTTP 403 ExpiredToken ('The token expired')"));
  // A huge message is cut, head and tail kept.
  r.body = "<Error><Message>" + std::string(100000, 'm') + "</Message></Error>";
  CHECK(status_from_http(r, "GET x").to_string().size() < 1000);
}

TEST_CASE("a listed entry whose key holds a control byte is not an entry", "[unit]") {
  // A planted object: its key would reach $GITHUB_OUTPUT as cache-matched-key and forge a line.
  CHECK(key_of_entry("", "deps-%0Acache-hit=true.tar.zst") == std::nullopt);
  CHECK(key_of_entry("", "deps-%1B%5B2J.tar.zst") == std::nullopt);
  CHECK(key_of_entry("", "deps-1.tar.zst") == std::optional<std::string>("deps-1"));
}
