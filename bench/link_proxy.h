// SPDX-License-Identifier: MIT
// File: bench/link_proxy.h -- a user-space link emulator: a TCP proxy that adds round-trip delay
// and caps bandwidth between the benchmarked tools and the object store.
//
// Why a proxy: this machine's kernel has no netem, so latency cannot be added with tc. The proxy
// sits on loopback between a client (curl, rclone, lazycache) and the store and shapes every
// connection like a WAN link:
//  - Delay line: bytes read from either side are released to the other side half an RTT later,
//    in order. So each request/response turn costs one RTT, as on a real link, whether the
//    client makes one request per connection or reuses it. A FIN travels the same way.
//  - Handshake: a new connection's first bytes wait one extra RTT (the TCP SYN/SYN-ACK turn),
//    so tools that open many connections pay for them as they would on a real link.
//  - Bandwidth: token buckets applied where delayed bytes leave the proxy, one per connection
//    and one shared by all connections (the runner's link). Bursts are 2 ms of the rate
//    (at least 16 KiB), small enough that a cap holds within a few ms.
// Not modelled: slow start, loss, jitter, reordering. The delay line adds no queueing of its own
// beyond the bandwidth caps.
//
// Data flow: one thread runs an epoll loop (run()); sockets are non-blocking; a direction stops
// reading its source when more than max_queued_bytes wait in its delay line (back-pressure).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace lazycache::bench {

// A token bucket: pure policy, no clock of its own (times are passed in, in ns). Not thread-safe.
class TokenBucket {
 public:
  // rate_bytes_per_s == 0 means unlimited: available() is always "a lot" and take() is free.
  TokenBucket(uint64_t rate_bytes_per_s, uint64_t burst_bytes, int64_t now_ns);

  bool unlimited() const { return rate_ == 0; }
  // Adds the tokens earned since the last refill, capped at the burst size.
  void refill(int64_t now_ns);
  uint64_t available() const;
  // Spends n tokens; n must not exceed available().
  void take(uint64_t n);
  // Nanoseconds from the last refill until n tokens (n <= burst) are available; 0 if they are.
  int64_t ns_until(uint64_t n) const;
  uint64_t burst_bytes() const { return burst_; }

 private:
  uint64_t rate_;
  uint64_t burst_;
  double tokens_;
  int64_t last_ns_;
};

// Burst of a bucket for `rate_bytes_per_s`: 2 ms of the rate, at least 16 KiB.
uint64_t default_burst_bytes(uint64_t rate_bytes_per_s);

struct LinkProfile {
  std::string name;
  uint32_t rtt_us = 0;
  uint64_t conn_rate_bytes_per_s = 0;   // per connection; 0 = unlimited
  uint64_t total_rate_bytes_per_s = 0;  // all connections together; 0 = unlimited
  std::string description;
};

// The named profiles bench/run.sh uses: "loopback" (nothing added), "hosted" (a hosted CI runner
// in the same region as its S3 bucket: 20 ms RTT, 1 Gbit/s link, 700 Mbit/s per connection, about
// what one S3 GET stream delivers), "far" (a self-hosted runner far from its storage: 60 ms RTT,
// 200 Mbit/s link, 100 Mbit/s per connection). Returns kInvalidArgument for other names.
Result<LinkProfile> link_profile(std::string_view name);
// "loopback, hosted, far": for usage messages.
std::string link_profile_names();

struct LinkProxyConfig {
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;  // 0: any free port; see LinkProxy::port()
  std::string upstream_host = "127.0.0.1";
  uint16_t upstream_port = 0;
  uint32_t rtt_us = 0;
  uint64_t conn_rate_bytes_per_s = 0;
  uint64_t total_rate_bytes_per_s = 0;
  bool handshake_rtt = true;
  // Per direction of a connection. Must hold a bandwidth-delay product (1 Gbit/s x 60 ms = 7.5 MB)
  // or the delay line, not the cap, would limit throughput.
  uint64_t max_queued_bytes = 32ull << 20;
  // When not empty: JSON counters written here (temp name + rename) at most every 100 ms while
  // they change, and at exit, so a script can read bytes moved per scenario.
  std::string stats_path;
};

struct LinkStats {
  uint64_t connections = 0;  // accepted so far
  uint64_t active_connections = 0;
  uint64_t bytes_to_upstream = 0;  // written to the store side
  uint64_t bytes_to_client = 0;    // written to the client side: what a client fetched
};

class LinkProxy {
 public:
  // Binds and listens. Errors: kInvalidArgument (bad host or no upstream port), kIo (socket calls).
  static Result<std::unique_ptr<LinkProxy>> create(LinkProxyConfig config);
  ~LinkProxy();
  LinkProxy(const LinkProxy&) = delete;
  LinkProxy& operator=(const LinkProxy&) = delete;

  // The bound listening port (the real one when listen_port was 0).
  uint16_t port() const { return port_; }

  // Serves connections until stop(). Blocking; call from one thread only. Returns kIo if epoll
  // fails; per-connection errors only close that connection (and reset its peer).
  Status run();
  // Makes run() return soon. Thread-safe and async-signal-safe.
  void stop();
  // Counters so far. Thread-safe.
  LinkStats stats() const;

 private:
  struct Impl;
  LinkProxy(LinkProxyConfig config, int listen_fd, uint16_t port);

  LinkProxyConfig config_;
  int listen_fd_;
  int stop_fd_;
  uint16_t port_;
  std::atomic<uint64_t> connections_{0}, active_{0}, to_upstream_{0}, to_client_{0};
};

}  // namespace lazycache::bench
