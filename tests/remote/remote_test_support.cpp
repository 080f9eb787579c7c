// SPDX-License-Identifier: MIT
#include "remote_test_support.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "remote/http_client.h"

namespace lazycache::remote::test {

std::string ramp(uint64_t seed, uint64_t offset, size_t n) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>((seed + offset + i) % 251);
  return out;
}

BodyReader string_body(std::shared_ptr<const std::string> bytes, size_t chunk) {
  auto pos = std::make_shared<size_t>(0);
  return [bytes, pos, chunk](std::span<std::byte> out) -> Result<size_t> {
    size_t n = std::min({out.size(), chunk, bytes->size() - *pos});
    std::memcpy(out.data(), bytes->data() + *pos, n);
    *pos += n;
    return n;
  };
}

S3Env load_s3_env(const char* var) {
  const char* path = std::getenv(var);
  INFO("environment variable " << var << " names the test server's env file (set by ctest)");
  REQUIRE(path != nullptr);
  std::ifstream in(path);
  INFO("env file " << path);
  REQUIRE(in.good());
  std::map<std::string, std::string> kv;
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return S3Env{kv["S3_ENDPOINT"], kv["S3_REGION"], kv["S3_ACCESS_KEY"], kv["S3_SECRET_KEY"], kv["S3_VHOST_ENDPOINT"]};
}

namespace {
std::shared_ptr<S3ObjectStore> s3_store(const std::string& endpoint, bool path_style, const S3Env& env, const std::string& prefix,
                                        S3Config config, const std::string& token) {
  auto ep = parse_endpoint(endpoint);
  INFO("endpoint " << endpoint);
  REQUIRE(ep.ok());
  config.endpoint = *ep;
  config.bucket = "lazycache";
  config.prefix = prefix;
  config.region = env.region;
  config.path_style = path_style;
  config.part_retry.base_delay_ms = 20;
  return std::make_shared<S3ObjectStore>(config, CredentialSource::fixed(AwsCredentials{env.access_key, env.secret_key, token}));
}
}  // namespace

std::shared_ptr<S3ObjectStore> s3_store_from_env(const S3Env& env, const std::string& prefix, S3Config config,
                                                 const std::string& session_token) {
  return s3_store(env.endpoint, true, env, prefix, config, session_token);
}

std::shared_ptr<S3ObjectStore> s3_vhost_store_from_env(const S3Env& env, const std::string& prefix) {
  INFO("S3_VHOST_ENDPOINT missing from the server's env file (restart it with tests/servers/*.sh)");
  REQUIRE(!env.vhost_endpoint.empty());
  return s3_store(env.vhost_endpoint, false, env, prefix, {}, "");
}

std::string run_id() {
  static std::string id = "run-" + std::to_string(::getpid()) + "-" +
                          std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000007);
  return id;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/lc-remote-test-XXXXXX";
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

FaultProxy::FaultProxy(const std::string& upstream, const std::string& origin_dir) {
  std::string script = std::string(LC_SOURCE_DIR) + "/tests/tools/fault_proxy.py";
  std::string port_file = dir_.path() + "/port";
  pid_ = ::fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    std::string mode = upstream.empty() ? "--origin-dir" : "--upstream";
    std::string target = upstream.empty() ? origin_dir : upstream;
    ::execl(LC_PYTHON3, LC_PYTHON3, script.c_str(), mode.c_str(), target.c_str(), "--port-file", port_file.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 200 && port_ == 0; ++i) {
    std::ifstream in(port_file);
    if (!(in >> port_)) port_ = 0;
    if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  REQUIRE(port_ != 0);
}

FaultProxy::~FaultProxy() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

std::string FaultProxy::control(const std::string& method, const std::string& path, const std::string& body) {
  HttpClient http;
  HttpRequest req;
  req.method = method;
  req.url = url() + path;
  req.body = std::as_bytes(std::span<const char>(body));
  auto r = http.perform(req, "fault proxy control " + path);
  REQUIRE(r.ok());
  REQUIRE(r->status == 200);
  return r->body;
}

void FaultProxy::set_plan(const std::string& json) { control("PUT", "/__proxy/plan", json); }

int FaultProxy::request_count() {
  std::string log = control("GET", "/__proxy/log", "");
  auto pos = log.find("\"count\":");
  REQUIRE(pos != std::string::npos);
  return std::atoi(log.c_str() + pos + 8);
}

}  // namespace lazycache::remote::test
