// SPDX-License-Identifier: MIT
// What an S3 request with temporary credentials carries on the wire, seen by a one-shot loopback
// HTTP listener: X-Amz-Security-Token with the token, named in the Authorization header's
// SignedHeaders (so the signature covers it); and that the token and the secret never reach the
// error message. (Servers that verify SigV4 accept it: remote_conformance_swift.)
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <thread>

#include "remote/s3_object_store.h"

using namespace lazycache;
using namespace lazycache::remote;

namespace {

// Accepts one connection, keeps the request head, answers `reply` and closes.
class OneShotServer {
 public:
  explicit OneShotServer(std::string reply) : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 1) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~OneShotServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  // The request head, header names lower-cased (after the client is done).
  const std::string& request() const { return request_; }

 private:
  void serve() {
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    char buf[4096];
    while (request_.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0) break;
      request_.append(buf, static_cast<size_t>(n));
    }
    std::transform(request_.begin(), request_.end(), request_.begin(), [](unsigned char ch) { return std::tolower(ch); });
    (void)!::write(c, reply_.data(), reply_.size());
    ::close(c);
  }
  std::string reply_;
  int fd_ = -1;
  int port_ = 0;
  std::string request_;
  std::thread thread_;
};

std::shared_ptr<S3ObjectStore> store_at(int port, const std::string& token) {
  S3Config config;
  config.endpoint = HttpEndpoint{"http", "127.0.0.1:" + std::to_string(port)};
  config.bucket = "bucket";
  config.region = "us-east-1";
  config.transfer.connect_timeout_ms = 5000;
  return std::make_shared<S3ObjectStore>(config, CredentialSource::fixed(AwsCredentials{"AKIDTEST", "secret-that-must-not-leak", token}));
}

}  // namespace

TEST_CASE("a session token is sent as X-Amz-Security-Token and signed", "[unit]") {
  const std::string token = "IQoJb3JpZ2luX2VjEXAMPLE-token/with+odd=chars";
  std::string request;
  {
    OneShotServer server("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    auto h = store_at(server.port(), token)->head("some/key");
    REQUIRE(!h.ok());
    CHECK(h.error().code() == ErrorCode::kNotFound);
    request = server.request();
  }
  INFO(request);
  std::string lowered_token = token;
  std::transform(lowered_token.begin(), lowered_token.end(), lowered_token.begin(), [](unsigned char c) { return std::tolower(c); });
  CHECK(request.find("\r\nx-amz-security-token: " + lowered_token + "\r\n") != std::string::npos);
  auto auth = request.find("\r\nauthorization: aws4-hmac-sha256 ");
  REQUIRE(auth != std::string::npos);
  auto signed_headers = request.find("signedheaders=", auth);
  REQUIRE(signed_headers != std::string::npos);
  const std::string list = request.substr(signed_headers, request.find(',', signed_headers) - signed_headers);
  CHECK(list.find("x-amz-security-token") != std::string::npos);
  CHECK(list.find("host") != std::string::npos);
  CHECK(request.find("secret-that-must-not-leak") == std::string::npos);
}

TEST_CASE("without a token no X-Amz-Security-Token is sent", "[unit]") {
  OneShotServer server("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  auto h = store_at(server.port(), "")->head("k");
  REQUIRE(!h.ok());
  CHECK(server.request().find("x-amz-security-token") == std::string::npos);
}

TEST_CASE("a rejected request with a session token names bucket and key, never the token or secret", "[unit]") {
  const std::string token = "TokenThatMustNotLeak0123456789";
  const std::string body = "<Error><Code>AccessDenied</Code><Message>denied</Message></Error>";
  OneShotServer server("HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\nConnection: close\r\n\r\n" + body);
  std::string buf(10, '\0');
  auto g = store_at(server.port(), token)->get_range(RangeRequest{"the/key", 0, 10, ""}, std::as_writable_bytes(std::span<char>(buf)));
  REQUIRE(!g.ok());
  INFO(g.error().message());
  CHECK(g.error().code() == ErrorCode::kPermissionDenied);
  CHECK(g.error().message().find("s3://bucket") != std::string::npos);
  CHECK(g.error().message().find("the/key") != std::string::npos);
  CHECK(g.error().message().find(token) == std::string::npos);
  CHECK(g.error().message().find("secret-that-must-not-leak") == std::string::npos);
}
