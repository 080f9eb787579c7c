// SPDX-License-Identifier: MIT
// The tools/ side of keeping secrets: the save record holds store URLs redacted and gets the
// full URL from the environment again; argv is redacted in place; the run directory is 0700
// and its files 0600 (tools/save_record.h, tools/argv_redaction.h, tools/run_files.h).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fs/local_files.h"
#include "tools/argv_redaction.h"
#include "tools/command.h"
#include "tools/mount_state.h"
#include "tools/run_files.h"
#include "tools/save_record.h"
#include "tools/store_options.h"

using namespace lazycache;
using namespace lazycache::cli;
namespace stdfs = std::filesystem;

namespace {

constexpr const char* kSecretUrl = "http://u:hunter2@127.0.0.1:1/e.tar.zst?X-Amz-Signature=s1gn&X-Amz-Expires=60";
constexpr const char* kRedactedUrl = "http://***@127.0.0.1:1/e.tar.zst?X-Amz-Signature=***&X-Amz-Expires=60";

mode_t mode_of(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

struct TempRunDir {
  std::string dir;
  TempRunDir() {
    char tmpl[] = "/tmp/lc-secret-files-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    ::setenv("LAZYCACHE_RUN_DIR", (dir + "/run").c_str(), 1);
  }
  ~TempRunDir() {
    ::unsetenv("LAZYCACHE_RUN_DIR");
    ::unsetenv("LAZYCACHE_STORE");
    std::error_code ec;
    stdfs::remove_all(dir, ec);
  }
};

SaveRecord record_from(const std::vector<std::string>& argv) {
  ArgParser args("mount", "", argv);
  add_store_options(args);
  int code = 0;
  REQUIRE(args.parse(code));
  auto settings = recorded_store_settings(args, StoreUse::kWrite);
  REQUIRE(settings.ok());
  return SaveRecord{"/ws/mnt", "k", "", true, 1, "", *settings, ""};
}

}  // namespace

TEST_CASE("the save record holds store URLs redacted, 0600 in a 0700 run directory", "[unit]") {
  TempRunDir tmp;
  SaveRecord rec = record_from({"--store", kSecretUrl});
  REQUIRE(write_save_record(rec).ok());
  const std::string file = save_record_path("/ws/mnt");
  CHECK(mode_of(run_dir()) == 0700);
  CHECK(mode_of(file) == 0600);
  auto read = lazycache::fs::read_whole_file(file, 1 << 20);
  REQUIRE(read.ok());
  const std::string& text = *read;
  CHECK(text.find("hunter2") == std::string::npos);
  CHECK(text.find("s1gn") == std::string::npos);
  CHECK(text.find(std::string("\nstore=") + kRedactedUrl + "\n") != std::string::npos);
}

TEST_CASE("unmount --save gets the full URL from $LAZYCACHE_STORE again, only the same one", "[unit]") {
  TempRunDir tmp;
  REQUIRE(write_save_record(record_from({"--store=" + std::string(kSecretUrl)})).ok());
  auto plain = read_save_record("/ws/mnt");
  REQUIRE(plain.ok());
  CHECK(plain->store.url == kRedactedUrl);
  ::setenv("LAZYCACHE_STORE", "http://u:other@127.0.0.1:1/e.tar.zst?X-Amz-Signature=x&X-Amz-Expires=99", 1);
  auto other = read_save_record("/ws/mnt");
  REQUIRE(other.ok());
  CHECK(other->store.url == plain->store.url);  // another store: never substituted
  ::setenv("LAZYCACHE_STORE", kSecretUrl, 1);
  auto same = read_save_record("/ws/mnt");
  REQUIRE(same.ok());
  CHECK(same->store.url == kSecretUrl);
}

TEST_CASE("an existing run directory is narrowed to 0700; a file in its place is refused", "[unit]") {
  TempRunDir tmp;
  REQUIRE(::mkdir(run_dir().c_str(), 0755) == 0);
  REQUIRE(make_run_dir().ok());
  CHECK(mode_of(run_dir()) == 0700);
  REQUIRE(write_run_file(run_dir() + "/f", "x").ok());
  CHECK(mode_of(run_dir() + "/f") == 0600);
  ::setenv("LAZYCACHE_RUN_DIR", (run_dir() + "/f").c_str(), 1);
  Status s = make_run_dir();
  CHECK(!s.ok());
}

TEST_CASE("redact_own_argv overwrites secrets in place, lengths kept", "[unit]") {
  std::string a0 = "lazycache", a1 = "mount", a2 = "--store", a3 = kSecretUrl, a4 = std::string("--store=") + kSecretUrl,
              a5 = "http://h/k?sig=ab", a6 = "/plain/path";
  std::vector<char*> argv = {a0.data(), a1.data(), a2.data(), a3.data(), a4.data(), a5.data(), a6.data()};
  const std::string a3_before = a3;
  redact_own_argv(static_cast<int>(argv.size()), argv.data());
  CHECK(std::string(argv[3]) == kRedactedUrl);
  CHECK(a3.size() == a3_before.size());  // NUL-padded inside its own bytes
  CHECK(std::string(argv[4]) == std::string("--store=") + kRedactedUrl);
  CHECK(std::string(argv[5]) == "http://h/k?sig=**");  // "***" is longer than "ab": cut to fit
  CHECK(std::string(argv[6]) == "/plain/path");
  CHECK(std::string(argv[1]) == "mount");
}
