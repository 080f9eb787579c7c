// SPDX-License-Identifier: MIT
// The link emulator: bytes pass unchanged and in order, each turn costs the RTT, the caps hold,
// failures travel to the other side. Real sockets on loopback; each case takes well under 1 s.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "bench/link_proxy.h"

using namespace lazycache;
using namespace lazycache::bench;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int listen_any(uint16_t& port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(listen(fd, 16) == 0);
  socklen_t len = sizeof a;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  port = ntohs(a.sin_port);
  return fd;
}

int connect_to(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads until EOF or `limit` bytes.
std::vector<char> read_all(int fd, size_t limit = SIZE_MAX) {
  std::vector<char> out;
  char buf[65536];
  while (out.size() < limit) {
    ssize_t n = read(fd, buf, std::min(sizeof buf, limit - out.size()));
    if (n <= 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  return out;
}

// The store stand-in: echoes each connection's bytes back until EOF, then closes.
class EchoServer {
 public:
  EchoServer() : listen_fd_(listen_any(port_)) {
    thread_ = std::thread([this] {
      std::vector<std::thread> workers;
      for (;;) {
        int fd = accept(listen_fd_, nullptr, nullptr);
        if (fd < 0 || stopping_) {
          if (fd >= 0) close(fd);
          break;
        }
        workers.emplace_back([fd] {
          char buf[65536];
          for (;;) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n <= 0 || !write_all(fd, buf, static_cast<size_t>(n))) break;
          }
          close(fd);
        });
      }
      for (auto& w : workers) w.join();
    });
  }
  ~EchoServer() {
    stopping_ = true;
    close(connect_to(port_));  // wakes accept()
    thread_.join();
    close(listen_fd_);
  }
  uint16_t port() const { return port_; }

 private:
  uint16_t port_ = 0;
  int listen_fd_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// A proxy running on its own thread for the test's lifetime; stopped and joined at scope exit.
class RunningProxy {
 public:
  explicit RunningProxy(LinkProxyConfig cfg) {
    auto p = LinkProxy::create(std::move(cfg));
    REQUIRE(p.ok());
    proxy_ = std::move(p.value());
    thread_ = std::thread([this] { status_ = proxy_->run(); });
  }
  ~RunningProxy() {
    proxy_->stop();
    thread_.join();
    CHECK(status_.ok());
  }
  LinkProxy& operator*() { return *proxy_; }
  LinkProxy* operator->() { return proxy_.get(); }

 private:
  std::unique_ptr<LinkProxy> proxy_;
  std::thread thread_;
  Status status_;
};

std::vector<char> random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<char> v(n);
  for (auto& c : v) c = static_cast<char>(rng());
  return v;
}

// Sends `data` from a second thread while this one reads the echo: a full round trip of `data`.
std::vector<char> echo_through(uint16_t port, const std::vector<char>& data) {
  int fd = connect_to(port);
  std::thread writer([&] {
    CHECK(write_all(fd, data.data(), data.size()));
    shutdown(fd, SHUT_WR);
  });
  std::vector<char> back = read_all(fd);
  writer.join();
  close(fd);
  return back;
}

LinkProxyConfig config_for(uint16_t upstream_port) {
  LinkProxyConfig cfg;
  cfg.upstream_port = upstream_port;
  return cfg;
}

}  // namespace

TEST_CASE("token bucket: burst first, then the rate", "[link_proxy]") {
  TokenBucket b(1000, 100, 0);
  CHECK(b.available() == 100);
  b.take(100);
  CHECK(b.available() == 0);
  CHECK(b.ns_until(50) >= 50'000'000);
  CHECK(b.ns_until(50) <= 50'000'001);
  b.refill(25'000'000);
  CHECK(b.available() == 25);
  b.refill(10'000'000'000);
  CHECK(b.available() == 100);   // capped at the burst
  CHECK(b.ns_until(1000) == 0);  // asks beyond the burst wait only for the burst
  TokenBucket unlimited(0, 16384, 0);
  CHECK(unlimited.unlimited());
  unlimited.take(1ull << 40);
  CHECK(unlimited.available() > (1ull << 40));
  CHECK(default_burst_bytes(125'000'000) == 250'000);
  CHECK(default_burst_bytes(1000) == 16 * 1024);
}

TEST_CASE("link profiles: the named ones exist, others are an error", "[link_proxy]") {
  auto loop = link_profile("loopback");
  REQUIRE(loop.ok());
  CHECK(loop->rtt_us == 0);
  CHECK(loop->total_rate_bytes_per_s == 0);
  auto hosted = link_profile("hosted");
  REQUIRE(hosted.ok());
  auto far = link_profile("far");
  REQUIRE(far.ok());
  CHECK(hosted->rtt_us < far->rtt_us);
  CHECK(hosted->total_rate_bytes_per_s > far->total_rate_bytes_per_s);
  CHECK(far->conn_rate_bytes_per_s <= far->total_rate_bytes_per_s);
  auto bad = link_profile("moon");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code() == ErrorCode::kInvalidArgument);
  CHECK(bad.error().message().find("moon") != std::string::npos);
}

TEST_CASE("bytes pass unchanged and in order; EOF and counters follow", "[link_proxy]") {
  EchoServer server;
  RunningProxy proxy(config_for(server.port()));
  std::vector<char> data = random_bytes(3u << 20, 7);
  std::vector<char> back = echo_through(proxy->port(), data);
  REQUIRE(back.size() == data.size());
  CHECK(std::memcmp(back.data(), data.data(), data.size()) == 0);
  // Counters are updated as bytes are written; the connection may still be closing.
  for (int i = 0; i < 100 && proxy->stats().active_connections != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  LinkStats s = proxy->stats();
  CHECK(s.connections == 1);
  CHECK(s.active_connections == 0);
  CHECK(s.bytes_to_upstream == data.size());
  CHECK(s.bytes_to_client == data.size());
}

TEST_CASE("each request/response turn costs one RTT, a new connection one more", "[link_proxy]") {
  EchoServer server;
  LinkProxyConfig cfg = config_for(server.port());
  cfg.rtt_us = 40'000;
  RunningProxy proxy(cfg);
  auto t0 = Clock::now();
  int fd = connect_to(proxy->port());
  char c = 'x';
  REQUIRE(write_all(fd, &c, 1));
  REQUIRE(read(fd, &c, 1) == 1);
  double first = seconds_since(t0);
  CHECK(first >= 0.080);  // handshake RTT + the turn
  CHECK(first < 0.5);
  auto t1 = Clock::now();
  for (int i = 0; i < 3; ++i) {
    REQUIRE(write_all(fd, &c, 1));
    REQUIRE(read(fd, &c, 1) == 1);
  }
  double three = seconds_since(t1);
  CHECK(three >= 0.120);
  CHECK(three < 0.8);
  close(fd);

  cfg.handshake_rtt = false;
  RunningProxy no_handshake(cfg);
  auto t2 = Clock::now();
  fd = connect_to(no_handshake->port());
  REQUIRE(write_all(fd, &c, 1));
  REQUIRE(read(fd, &c, 1) == 1);
  double turn = seconds_since(t2);
  CHECK(turn >= 0.040);
  CHECK(turn < 0.075);
  close(fd);
}

TEST_CASE("the per-connection cap limits one connection", "[link_proxy]") {
  EchoServer server;
  LinkProxyConfig cfg = config_for(server.port());
  cfg.conn_rate_bytes_per_s = 5'000'000;  // 40 Mbit/s each way
  RunningProxy proxy(cfg);
  std::vector<char> data = random_bytes(2'000'000, 11);
  auto t0 = Clock::now();
  std::vector<char> back = echo_through(proxy->port(), data);
  double secs = seconds_since(t0);
  CHECK(back == data);
  // 2 MB at 5 MB/s, less one 16 KiB burst per direction: at least ~0.39 s.
  CHECK(secs >= 0.38);
  CHECK(secs < 3.0);
}

TEST_CASE("the total cap is shared by all connections", "[link_proxy]") {
  EchoServer server;
  LinkProxyConfig cfg = config_for(server.port());
  cfg.total_rate_bytes_per_s = 5'000'000;
  RunningProxy proxy(cfg);
  std::vector<char> a = random_bytes(1'000'000, 1), b = random_bytes(1'000'000, 2);
  std::vector<char> back_b;
  auto t0 = Clock::now();
  std::thread other([&] { back_b = echo_through(proxy->port(), b); });
  std::vector<char> back_a = echo_through(proxy->port(), a);
  other.join();
  double secs = seconds_since(t0);
  CHECK(back_a == a);
  CHECK(back_b == b);
  // 2 MB in all through one 5 MB/s link: at least ~0.39 s, although each alone would be uncapped.
  CHECK(secs >= 0.38);
  CHECK(secs < 3.0);
  CHECK(proxy->stats().connections == 2);
}

TEST_CASE("an upstream that refuses closes the client's connection", "[link_proxy]") {
  uint16_t dead_port = 0;
  close(listen_any(dead_port));  // a port with nobody listening
  RunningProxy proxy(config_for(dead_port));
  int fd = connect_to(proxy->port());
  auto t0 = Clock::now();
  char c = 'x';
  (void)write_all(fd, &c, 1);
  CHECK(read(fd, &c, 1) <= 0);  // EOF or reset, not a hang
  CHECK(seconds_since(t0) < 1.0);
  close(fd);
}

TEST_CASE("bad configuration is refused with a clear error", "[link_proxy]") {
  LinkProxyConfig no_upstream;
  auto r = LinkProxy::create(no_upstream);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("upstream") != std::string::npos);
  LinkProxyConfig bad_host = config_for(1);
  bad_host.listen_host = "localhost:x";
  auto r2 = LinkProxy::create(bad_host);
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.error().code() == ErrorCode::kInvalidArgument);
}
