// SPDX-License-Identifier: MIT
// lc-link-proxy: the link emulator as a program, for bench/run.sh (see bench/link_proxy.h).
//   lc-link-proxy --upstream HOST:PORT [--listen HOST:PORT] [--profile NAME]
//                 [--rtt-ms N] [--rate-mbit N] [--total-mbit N] [--no-handshake]
//                 [--port-file FILE] [--stats FILE] [--describe]
// Runs until SIGINT or SIGTERM. --rtt-ms / --rate-mbit / --total-mbit override the profile.
// --describe prints the effective link as JSON and exits. Caps of 0 mean no cap.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/link_proxy.h"

using lazycache::Result;
using lazycache::Status;
using lazycache::bench::LinkProxy;
using lazycache::bench::LinkProxyConfig;

namespace {

LinkProxy* g_proxy = nullptr;

void on_signal(int) {
  if (g_proxy != nullptr) g_proxy->stop();
}

int usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "lc-link-proxy: %s\n", why.c_str());
  std::fprintf(stderr,
               "usage: lc-link-proxy --upstream HOST:PORT [--listen HOST:PORT] [--profile NAME]\n"
               "         [--rtt-ms N] [--rate-mbit N] [--total-mbit N] [--no-handshake]\n"
               "         [--port-file FILE] [--stats FILE] [--describe]\n"
               "profiles: %s. Rates are per direction, in Mbit/s (10^6 bits); 0 = no cap.\n",
               lazycache::bench::link_profile_names().c_str());
  return 2;
}

bool split_host_port(const std::string& s, std::string& host, uint16_t& port) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  char* end = nullptr;
  unsigned long p = std::strtoul(s.c_str() + colon + 1, &end, 10);
  if (end == s.c_str() + colon + 1 || *end != '\0' || p > 65535) return false;
  host = colon == 0 ? "127.0.0.1" : s.substr(0, colon);
  port = static_cast<uint16_t>(p);
  return true;
}

bool parse_number(const std::string& s, double& out) {
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end != s.c_str() && *end == '\0' && out >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  LinkProxyConfig cfg;
  std::string port_file;
  std::vector<std::string> args(argv + 1, argv + argc);
  double rtt_ms = -1, rate_mbit = -1, total_mbit = -1;
  std::string profile_name = "loopback";
  bool describe = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size()) return false;
      out = args[++i];
      return true;
    };
    std::string v;
    if (a == "--no-handshake") {
      cfg.handshake_rtt = false;
    } else if (a == "--describe") {
      describe = true;
    } else if (a == "--help" || a == "-h") {
      usage("");
      return 0;
    } else if (!value(v)) {
      return usage("unknown option or missing value: " + a);
    } else if (a == "--upstream") {
      if (!split_host_port(v, cfg.upstream_host, cfg.upstream_port)) return usage("bad --upstream " + v);
    } else if (a == "--listen") {
      if (!split_host_port(v, cfg.listen_host, cfg.listen_port)) return usage("bad --listen " + v);
    } else if (a == "--profile") {
      profile_name = v;
    } else if (a == "--rtt-ms") {
      if (!parse_number(v, rtt_ms)) return usage("bad --rtt-ms " + v);
    } else if (a == "--rate-mbit") {
      if (!parse_number(v, rate_mbit)) return usage("bad --rate-mbit " + v);
    } else if (a == "--total-mbit") {
      if (!parse_number(v, total_mbit)) return usage("bad --total-mbit " + v);
    } else if (a == "--port-file") {
      port_file = v;
    } else if (a == "--stats") {
      cfg.stats_path = v;
    } else {
      return usage("unknown option " + a);
    }
  }
  Result<lazycache::bench::LinkProfile> profile = lazycache::bench::link_profile(profile_name);
  if (!profile.ok()) return usage(profile.error().message());
  cfg.rtt_us = profile->rtt_us;
  cfg.conn_rate_bytes_per_s = profile->conn_rate_bytes_per_s;
  cfg.total_rate_bytes_per_s = profile->total_rate_bytes_per_s;
  if (rtt_ms >= 0) cfg.rtt_us = static_cast<uint32_t>(rtt_ms * 1000);
  if (rate_mbit >= 0) cfg.conn_rate_bytes_per_s = static_cast<uint64_t>(rate_mbit * 125000);
  if (total_mbit >= 0) cfg.total_rate_bytes_per_s = static_cast<uint64_t>(total_mbit * 125000);
  if (describe) {
    // The effective link as JSON, for reports (bench/report.py): no proxy is started.
    std::printf("{\"name\": \"%s\", \"rtt_ms\": %g, \"conn_mbit\": %g, \"total_mbit\": %g, \"handshake_rtt\": %s}\n", profile->name.c_str(),
                cfg.rtt_us / 1000.0, cfg.conn_rate_bytes_per_s / 125000.0, cfg.total_rate_bytes_per_s / 125000.0,
                cfg.handshake_rtt ? "true" : "false");
    return 0;
  }
  if (cfg.upstream_port == 0) return usage("--upstream HOST:PORT is required");

  auto proxy = LinkProxy::create(cfg);
  if (!proxy.ok()) {
    std::fprintf(stderr, "lc-link-proxy: %s\n", proxy.error().to_string().c_str());
    return 1;
  }
  g_proxy = proxy->get();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  if (!port_file.empty()) {
    // Written under a temp name and renamed, so a reader never sees a half-written port.
    std::string tmp = port_file + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr || std::fprintf(f, "%u\n", (*proxy)->port()) < 0 || std::fclose(f) != 0 ||
        std::rename(tmp.c_str(), port_file.c_str()) != 0) {
      std::fprintf(stderr, "lc-link-proxy: cannot write port file %s\n", port_file.c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "lc-link-proxy: 127.0.0.1:%u -> %s:%u, rtt %.1f ms, %.0f Mbit/s per connection, %.0f Mbit/s total\n",
               (*proxy)->port(), cfg.upstream_host.c_str(), cfg.upstream_port, cfg.rtt_us / 1000.0, cfg.conn_rate_bytes_per_s / 125000.0,
               cfg.total_rate_bytes_per_s / 125000.0);
  Status s = (*proxy)->run();
  g_proxy = nullptr;
  if (!s.ok()) {
    std::fprintf(stderr, "lc-link-proxy: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}
