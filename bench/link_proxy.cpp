// SPDX-License-Identifier: MIT
#include "bench/link_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <list>
#include <vector>

namespace lazycache::bench {

namespace {

constexpr int64_t kNsPerSec = 1'000'000'000;
// One read() takes at most this much: big enough that 1 Gbit/s needs only ~500 reads a second,
// small enough that a delay-line chunk is released in fine steps by the bandwidth caps.
constexpr size_t kReadChunkBytes = 256 * 1024;
constexpr int64_t kStatsIntervalNs = 100'000'000;

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
}

constexpr uint64_t mbit(uint64_t m) { return m * 1'000'000 / 8; }

void set_nodelay(int fd) {
  // Small requests must not wait for Nagle: the delay line is the only delay we want.
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Result<sockaddr_in> make_addr(const std::string& host, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return Status(ErrorCode::kInvalidArgument, "not an IPv4 address: '" + host + "'");
  }
  return addr;
}

}  // namespace

// ---- TokenBucket ----

TokenBucket::TokenBucket(uint64_t rate_bytes_per_s, uint64_t burst_bytes, int64_t now_ns)
    : rate_(rate_bytes_per_s), burst_(burst_bytes), tokens_(static_cast<double>(burst_bytes)), last_ns_(now_ns) {}

void TokenBucket::refill(int64_t now_ns) {
  if (now_ns <= last_ns_) return;
  if (rate_ != 0) {
    double earned = static_cast<double>(now_ns - last_ns_) * static_cast<double>(rate_) / 1e9;
    tokens_ = std::min(static_cast<double>(burst_), tokens_ + earned);
  }
  last_ns_ = now_ns;
}

uint64_t TokenBucket::available() const {
  if (rate_ == 0) return UINT64_MAX / 2;
  return static_cast<uint64_t>(tokens_);
}

void TokenBucket::take(uint64_t n) {
  if (rate_ == 0) return;
  tokens_ = std::max(0.0, tokens_ - static_cast<double>(n));
}

int64_t TokenBucket::ns_until(uint64_t n) const {
  if (rate_ == 0) return 0;
  double need = static_cast<double>(std::min(n, burst_)) - tokens_;
  if (need <= 0) return 0;
  return static_cast<int64_t>(need * 1e9 / static_cast<double>(rate_)) + 1;
}

uint64_t default_burst_bytes(uint64_t rate_bytes_per_s) { return std::max<uint64_t>(16 * 1024, rate_bytes_per_s / 500); }

// ---- profiles ----

Result<LinkProfile> link_profile(std::string_view name) {
  if (name == "loopback") return LinkProfile{"loopback", 0, 0, 0, "no delay, no cap"};
  if (name == "hosted") {
    return LinkProfile{"hosted", 20'000, mbit(700), mbit(1000), "hosted runner to S3: 20 ms RTT, 1 Gbit/s link, 700 Mbit/s per connection"};
  }
  if (name == "far") {
    return LinkProfile{"far", 60'000, mbit(100), mbit(200),
                       "self-hosted runner far from storage: 60 ms RTT, 200 Mbit/s link, 100 Mbit/s per connection"};
  }
  return Status(ErrorCode::kInvalidArgument, "unknown link profile '" + std::string(name) + "' (known: " + link_profile_names() + ")");
}

std::string link_profile_names() { return "loopback, hosted, far"; }

// ---- the event loop ----

namespace {

struct Chunk {
  int64_t release_ns;
  std::vector<char> data;
  size_t sent = 0;
};

// One direction of a connection: bytes read from `src` wait in `queue` and are written to `dst`.
struct Direction {
  int src = -1, dst = -1;
  std::deque<Chunk> queue;
  uint64_t queued_bytes = 0;
  bool src_eof = false;
  int64_t eof_release_ns = 0;
  bool dst_shut = false;
  bool dst_blocked = false;  // the last write hit EAGAIN; waiting for EPOLLOUT on dst
};

struct Conn;

// What an epoll event points at.
struct Endpoint {
  Conn* conn;
  int fd;
};

struct Conn {
  int client = -1, upstream = -1;
  bool upstream_connected = false;
  bool failed = false;
  int64_t ready_ns = 0;  // client bytes are not released before this (the handshake RTT)
  Direction up;          // client -> upstream
  Direction down;        // upstream -> client
  TokenBucket up_bucket, down_bucket;
  Endpoint client_ep{}, upstream_ep{};
  uint32_t client_events = 0, upstream_events = 0;
  bool client_registered = true, upstream_registered = true;

  Conn(uint64_t rate, int64_t now) : up_bucket(rate, default_burst_bytes(rate), now), down_bucket(rate, default_burst_bytes(rate), now) {}
  bool done() const { return failed || (up.dst_shut && down.dst_shut); }
};

}  // namespace

struct LinkProxy::Impl {
  LinkProxy& proxy;
  const LinkProxyConfig& cfg;
  int epfd = -1;
  std::list<Conn> conns;
  // Shared by all connections, one per direction: a link's capacity is per direction.
  TokenBucket total_up, total_down;
  Endpoint listen_ep{nullptr, -1}, stop_ep{nullptr, -1};
  std::vector<char> buf = std::vector<char>(kReadChunkBytes);
  int64_t half_rtt_ns;
  int64_t last_stats_ns = 0;
  LinkStats last_written{};
  bool stopping = false;

  Impl(LinkProxy& p, const LinkProxyConfig& c, int64_t now)
      : proxy(p), cfg(c), total_up(c.total_rate_bytes_per_s, default_burst_bytes(c.total_rate_bytes_per_s), now),
        total_down(c.total_rate_bytes_per_s, default_burst_bytes(c.total_rate_bytes_per_s), now),
        half_rtt_ns(static_cast<int64_t>(c.rtt_us) * 500) {}

  ~Impl() {
    for (Conn& c : conns) close_conn(c);
    if (epfd >= 0) close(epfd);
  }

  Status add(int fd, uint32_t events, void* ptr) {
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = ptr;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) return errno_status("epoll_ctl ADD");
    return Status();
  }

  // Interest of one socket: readable while its outgoing direction accepts more and has not
  // seen EOF; writable while its incoming direction is blocked (or while connecting).
  void update_interest(Conn& c, bool is_client) {
    int fd = is_client ? c.client : c.upstream;
    Direction& out_dir = is_client ? c.up : c.down;  // reads from fd
    Direction& in_dir = is_client ? c.down : c.up;   // writes to fd
    uint32_t want = 0;
    bool can_read = is_client || c.upstream_connected;
    if (can_read && !out_dir.src_eof && out_dir.queued_bytes < cfg.max_queued_bytes) want |= EPOLLIN;
    if (in_dir.dst_blocked || (!is_client && !c.upstream_connected)) want |= EPOLLOUT;
    uint32_t& have = is_client ? c.client_events : c.upstream_events;
    bool& registered = is_client ? c.client_registered : c.upstream_registered;
    if (!registered) return;
    if (out_dir.src_eof && in_dir.dst_shut) {
      // Both ways done: the socket would report EPOLLHUP for ever while the other socket of the
      // connection still drains, so it leaves the epoll set.
      epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nullptr);
      registered = false;
      return;
    }
    if (want == have) return;
    epoll_event ev{};
    ev.events = want;
    ev.data.ptr = is_client ? &c.client_ep : &c.upstream_ep;
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) == 0) have = want;
  }

  void close_conn(Conn& c) {
    if (c.failed) {
      // Pass a reset on as a reset, so the other side sees an error rather than a clean EOF.
      linger lg{1, 0};
      setsockopt(c.client, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      setsockopt(c.upstream, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    if (c.client >= 0) close(c.client);
    if (c.upstream >= 0) close(c.upstream);
    c.client = c.upstream = -1;
  }

  void accept_all(int64_t now) {
    for (;;) {
      int fd = accept4(proxy.listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          std::fprintf(stderr, "link-proxy: accept: %s\n", std::strerror(errno));
        }
        return;
      }
      set_nodelay(fd);
      int up = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      auto addr = make_addr(cfg.upstream_host, cfg.upstream_port);
      if (up < 0 || !addr.ok()) {
        close(fd);
        if (up >= 0) close(up);
        continue;
      }
      set_nodelay(up);
      int rc = connect(up, reinterpret_cast<const sockaddr*>(&addr.value()), sizeof(sockaddr_in));
      if (rc < 0 && errno != EINPROGRESS) {
        std::fprintf(stderr, "link-proxy: connect to upstream %s:%u: %s\n", cfg.upstream_host.c_str(), cfg.upstream_port,
                     std::strerror(errno));
        close(fd);
        close(up);
        continue;
      }
      Conn& c = conns.emplace_back(cfg.conn_rate_bytes_per_s, now);
      c.client = fd;
      c.upstream = up;
      c.upstream_connected = rc == 0;
      c.ready_ns = cfg.handshake_rtt ? now + 2 * half_rtt_ns : now;
      c.up.src = fd;
      c.up.dst = up;
      c.down.src = up;
      c.down.dst = fd;
      c.client_ep = Endpoint{&c, fd};
      c.upstream_ep = Endpoint{&c, up};
      c.client_events = EPOLLIN;
      c.upstream_events = c.upstream_connected ? EPOLLIN : EPOLLOUT;
      if (!add(fd, c.client_events, &c.client_ep).ok() || !add(up, c.upstream_events, &c.upstream_ep).ok()) {
        c.failed = true;
      }
      proxy.connections_.fetch_add(1, std::memory_order_relaxed);
      proxy.active_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Reads what `d.src` has into the delay line, up to the queue limit.
  void fill(Conn& c, Direction& d, int64_t now, bool from_client) {
    while (!d.src_eof && d.queued_bytes < cfg.max_queued_bytes) {
      ssize_t n = read(d.src, buf.data(), buf.size());
      if (n > 0) {
        int64_t start = from_client ? std::max(now, c.ready_ns) : now;
        d.queue.push_back(Chunk{start + half_rtt_ns, std::vector<char>(buf.data(), buf.data() + n)});
        d.queued_bytes += static_cast<uint64_t>(n);
        if (static_cast<size_t>(n) < buf.size()) return;  // drained for now
        continue;
      }
      if (n == 0) {
        d.src_eof = true;
        d.eof_release_ns = (from_client ? std::max(now, c.ready_ns) : now) + half_rtt_ns;
        return;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) c.failed = true;
      return;
    }
  }

  // Writes released bytes of the delay line within the caps. Returns the earliest time it
  // should be called again (INT64_MAX: when an fd event comes).
  int64_t drain(Conn& c, Direction& d, TokenBucket& conn_bucket, TokenBucket& total, int64_t now, std::atomic<uint64_t>& counter) {
    if (d.dst_blocked || c.failed || (&d == &c.up && !c.upstream_connected)) return INT64_MAX;
    conn_bucket.refill(now);
    total.refill(now);
    while (!d.queue.empty()) {
      Chunk& ch = d.queue.front();
      if (ch.release_ns > now) return ch.release_ns;
      uint64_t left = ch.data.size() - ch.sent;
      uint64_t allowed = std::min({left, conn_bucket.available(), total.available()});
      if (allowed == 0) {
        uint64_t want = std::min<uint64_t>(left, 16 * 1024);
        return now + std::max<int64_t>(1000, std::max(conn_bucket.ns_until(want), total.ns_until(want)));
      }
      ssize_t n = write(d.dst, ch.data.data() + ch.sent, allowed);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          d.dst_blocked = true;
          return INT64_MAX;
        }
        c.failed = true;
        return INT64_MAX;
      }
      conn_bucket.take(static_cast<uint64_t>(n));
      total.take(static_cast<uint64_t>(n));
      counter.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
      ch.sent += static_cast<size_t>(n);
      d.queued_bytes -= static_cast<uint64_t>(n);
      if (ch.sent == ch.data.size()) d.queue.pop_front();
    }
    if (d.src_eof && !d.dst_shut) {
      if (d.eof_release_ns > now) return d.eof_release_ns;
      shutdown(d.dst, SHUT_WR);
      d.dst_shut = true;
    }
    return INT64_MAX;
  }

  void on_event(Endpoint* ep, uint32_t events, int64_t now) {
    Conn& c = *ep->conn;
    bool is_client = ep->fd == c.client;
    if (!is_client && !c.upstream_connected && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(c.upstream, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        std::fprintf(stderr, "link-proxy: connect to upstream %s:%u: %s\n", cfg.upstream_host.c_str(), cfg.upstream_port,
                     std::strerror(err));
        c.failed = true;
        return;
      }
      c.upstream_connected = true;
    }
    if (events & EPOLLERR) {
      c.failed = true;
      return;
    }
    if (events & EPOLLOUT) (is_client ? c.down : c.up).dst_blocked = false;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
      if (is_client) fill(c, c.up, now, true);
      else if (c.upstream_connected) fill(c, c.down, now, false);
    }
  }

  void write_stats(int64_t now, bool force) {
    if (cfg.stats_path.empty()) return;
    LinkStats s = proxy.stats();
    bool changed = s.connections != last_written.connections || s.active_connections != last_written.active_connections ||
                   s.bytes_to_upstream != last_written.bytes_to_upstream || s.bytes_to_client != last_written.bytes_to_client;
    if (!changed && !force) return;
    if (!force && now - last_stats_ns < kStatsIntervalNs) return;
    std::string tmp = cfg.stats_path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr) return;
    std::fprintf(f,
                 "{\"connections\": %llu, \"active_connections\": %llu, \"bytes_to_upstream\": %llu, "
                 "\"bytes_to_client\": %llu}\n",
                 static_cast<unsigned long long>(s.connections), static_cast<unsigned long long>(s.active_connections),
                 static_cast<unsigned long long>(s.bytes_to_upstream), static_cast<unsigned long long>(s.bytes_to_client));
    bool ok = std::fclose(f) == 0;
    if (ok) std::rename(tmp.c_str(), cfg.stats_path.c_str());
    last_written = s;
    last_stats_ns = now;
  }

  Status loop() {
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) return errno_status("epoll_create1");
    listen_ep.fd = proxy.listen_fd_;
    stop_ep.fd = proxy.stop_fd_;
    LC_RETURN_IF_ERROR(add(proxy.listen_fd_, EPOLLIN, &listen_ep));
    LC_RETURN_IF_ERROR(add(proxy.stop_fd_, EPOLLIN, &stop_ep));
    std::vector<epoll_event> events(256);
    int64_t deadline = INT64_MAX;
    while (!stopping) {
      int64_t now = now_ns();
      timespec timeout{};
      timespec* tp = nullptr;
      if (deadline != INT64_MAX) {
        int64_t wait = std::max<int64_t>(0, deadline - now);
        if (!cfg.stats_path.empty()) wait = std::min(wait, kStatsIntervalNs);
        timeout.tv_sec = wait / kNsPerSec;
        timeout.tv_nsec = wait % kNsPerSec;
        tp = &timeout;
      } else if (!cfg.stats_path.empty()) {
        timeout.tv_nsec = kStatsIntervalNs;
        tp = &timeout;
      }
      int n = epoll_pwait2(epfd, events.data(), static_cast<int>(events.size()), tp, nullptr);
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno_status("epoll_pwait2");
      }
      now = now_ns();
      for (int i = 0; i < n; ++i) {
        auto* ep = static_cast<Endpoint*>(events[static_cast<size_t>(i)].data.ptr);
        if (ep == &stop_ep) {
          stopping = true;
        } else if (ep == &listen_ep) {
          accept_all(now);
        } else {
          on_event(ep, events[static_cast<size_t>(i)].events, now);
        }
      }
      deadline = INT64_MAX;
      for (auto it = conns.begin(); it != conns.end();) {
        Conn& c = *it;
        deadline = std::min(deadline, drain(c, c.up, c.up_bucket, total_up, now, proxy.to_upstream_));
        deadline = std::min(deadline, drain(c, c.down, c.down_bucket, total_down, now, proxy.to_client_));
        if (c.done()) {
          close_conn(c);
          it = conns.erase(it);
          proxy.active_.fetch_sub(1, std::memory_order_relaxed);
          continue;
        }
        update_interest(c, true);
        update_interest(c, false);
        ++it;
      }
      // Round robin: the connection served first takes the shared bucket's burst, so the
      // first place rotates.
      if (conns.size() > 1) conns.splice(conns.end(), conns, conns.begin());
      write_stats(now, false);
    }
    write_stats(now_ns(), true);
    return Status();
  }
};

// ---- LinkProxy ----

Result<std::unique_ptr<LinkProxy>> LinkProxy::create(LinkProxyConfig config) {
  if (config.upstream_port == 0) return Status(ErrorCode::kInvalidArgument, "link proxy: no upstream port");
  LC_ASSIGN_OR_RETURN(sockaddr_in listen_addr, make_addr(config.listen_host, config.listen_port));
  LC_ASSIGN_OR_RETURN(sockaddr_in upstream_addr, make_addr(config.upstream_host, config.upstream_port));
  (void)upstream_addr;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_status("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&listen_addr), sizeof listen_addr) < 0) {
    Status s = errno_status("bind " + config.listen_host + ":" + std::to_string(config.listen_port));
    close(fd);
    return s;
  }
  if (listen(fd, 512) < 0) {
    Status s = errno_status("listen");
    close(fd);
    return s;
  }
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  return std::unique_ptr<LinkProxy>(new LinkProxy(std::move(config), fd, ntohs(bound.sin_port)));
}

LinkProxy::LinkProxy(LinkProxyConfig config, int listen_fd, uint16_t port)
    : config_(std::move(config)), listen_fd_(listen_fd), stop_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)), port_(port) {}

LinkProxy::~LinkProxy() {
  close(listen_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

Status LinkProxy::run() {
  if (stop_fd_ < 0) return Status(ErrorCode::kIo, "link proxy: eventfd failed");
  Impl impl(*this, config_, now_ns());
  return impl.loop();
}

void LinkProxy::stop() {
  uint64_t one = 1;
  ssize_t rc = write(stop_fd_, &one, sizeof one);
  (void)rc;
}

LinkStats LinkProxy::stats() const {
  return LinkStats{connections_.load(std::memory_order_relaxed), active_.load(std::memory_order_relaxed),
                   to_upstream_.load(std::memory_order_relaxed), to_client_.load(std::memory_order_relaxed)};
}

}  // namespace lazycache::bench
