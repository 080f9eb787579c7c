// SPDX-License-Identifier: MIT
// The default settings file: syntax, refusals that name file:line, and "environment wins".
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tools/config_file.h"

using lazycache::cli::apply_default_config;
using lazycache::cli::parse_config;
namespace fs = std::filesystem;

TEST_CASE("settings file: comments, blanks, quotes, export prefix", "[unit]") {
  auto r = parse_config(
      "# store\n\nLAZYCACHE_STORE = s3://b/p\nexport AWS_REGION='eu-west-1'\n"
      "LAZYCACHE_ENDPOINT=\"http://127.0.0.1:9000\"\n",
      "cfg");
  REQUIRE(r.ok());
  REQUIRE(r->size() == 3);
  CHECK((*r)[0] == std::make_pair(std::string("LAZYCACHE_STORE"), std::string("s3://b/p")));
  CHECK((*r)[1] == std::make_pair(std::string("AWS_REGION"), std::string("eu-west-1")));
  CHECK((*r)[2].second == "http://127.0.0.1:9000");
}

TEST_CASE("settings file: bad lines are refused with file:line", "[unit]") {
  auto no_eq = parse_config("LAZYCACHE_STORE=x\njunk\n", "/etc/lazycache/config");
  REQUIRE_FALSE(no_eq.ok());
  CHECK(no_eq.error().message() == "/etc/lazycache/config:2: expected KEY=VALUE");
  auto unknown = parse_config("HOME=/x\n", "c");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message().find("c:1: unknown setting HOME") == 0);
  auto secret = parse_config("\nAWS_SECRET_ACCESS_KEY=abc\n", "c");
  REQUIRE_FALSE(secret.ok());
  CHECK(secret.error().message().find("c:2: AWS_SECRET_ACCESS_KEY: credentials do not belong") == 0);
  CHECK(secret.error().message().find("abc") == std::string::npos);  // never echo a secret
  CHECK_FALSE(parse_config("1BAD=x\n", "c").ok());
}

TEST_CASE("settings file: applied under LAZYCACHE_CONFIG, the environment wins", "[unit]") {
  fs::path dir = fs::temp_directory_path() / ("lc-config-test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::path file = dir / "config";
  std::ofstream(file) << "LAZYCACHE_TEST_A=from-file\nLAZYCACHE_TEST_B=from-file\n";
  setenv("LAZYCACHE_TEST_B", "from-env", 1);
  unsetenv("LAZYCACHE_TEST_A");
  setenv("LAZYCACHE_CONFIG", file.c_str(), 1);
  REQUIRE(apply_default_config().ok());
  CHECK(std::string(std::getenv("LAZYCACHE_TEST_A")) == "from-file");
  CHECK(std::string(std::getenv("LAZYCACHE_TEST_B")) == "from-env");

  setenv("LAZYCACHE_CONFIG", (dir / "missing").c_str(), 1);
  auto missing = apply_default_config();
  CHECK(missing.code() == lazycache::ErrorCode::kNotFound);
  CHECK(missing.message().find("missing (LAZYCACHE_CONFIG)") != std::string::npos);

  setenv("LAZYCACHE_CONFIG", "", 1);
  CHECK(apply_default_config().ok());
  unsetenv("LAZYCACHE_CONFIG");
  unsetenv("LAZYCACHE_TEST_A");
  unsetenv("LAZYCACHE_TEST_B");
  fs::remove_all(dir);
}
