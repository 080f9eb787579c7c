// SPDX-License-Identifier: MIT
// File: tests/remote/remote_test_support.h -- helpers for the store tests: ramp bytes, the S3 test
// servers' env files (written by tests/servers/*.sh), a fault_proxy.py child process, temp dirs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "remote/s3_object_store.h"

namespace lazycache::remote::test {

// byte(o) = (seed + o) % 251: any slice can be checked without a reference copy.
std::string ramp(uint64_t seed, uint64_t offset, size_t n);

// A BodyReader over a string, handing out at most `chunk` bytes per call.
BodyReader string_body(std::shared_ptr<const std::string> bytes, size_t chunk = 1 << 20);

// KEY=VALUE lines of the env file named by environment variable `var` (e.g. LC_S3_ENV).
// Fails the test (REQUIRE) when the variable or the file is missing.
struct S3Env {
  std::string endpoint, region, access_key, secret_key;
  std::string vhost_endpoint;  // S3_VHOST_ENDPOINT: Host BUCKET.<its host> is virtual-hosted
};
S3Env load_s3_env(const char* var);
// An S3 store on bucket "lazycache" of that server; path-style, with `session_token` (if any)
// sent as X-Amz-Security-Token.
std::shared_ptr<S3ObjectStore> s3_store_from_env(const S3Env& env, const std::string& prefix, S3Config overrides = {},
                                                 const std::string& session_token = "");
// The same through env.vhost_endpoint, virtual-hosted style (bucket in the Host header).
std::shared_ptr<S3ObjectStore> s3_vhost_store_from_env(const S3Env& env, const std::string& prefix);

// A unique name for this test run, so reruns against a kept server never collide.
std::string run_id();

// mkdtemp under $TMPDIR or /tmp, removed (recursively) by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// tests/tools/fault_proxy.py as a child process on a free loopback port; stopped by PID
// (SIGTERM, then SIGKILL) in the destructor.
class FaultProxy {
 public:
  // One of upstream ("http://127.0.0.1:18480") or origin_dir must be set.
  FaultProxy(const std::string& upstream, const std::string& origin_dir);
  ~FaultProxy();
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Replaces the fault plan (JSON list of rules, see fault_proxy.py).
  void set_plan(const std::string& json);
  // Number of requests the proxy has numbered so far.
  int request_count();

 private:
  std::string control(const std::string& method, const std::string& path, const std::string& body);
  TempDir dir_;
  int pid_ = -1;
  int port_ = 0;
};

}  // namespace lazycache::remote::test
