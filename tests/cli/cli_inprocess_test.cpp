// SPDX-License-Identifier: MIT
// Commands run in-process through the lc_cli library (tools/cli_main.h): parse + run + exit code
// + output, without a lazycache process (issue 19 item 4). And the save record's typed format.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "tests/format/tree_util.h"
#include "tools/cli_main.h"
#include "tools/command.h"
#include "tools/save_record.h"

using namespace lazycache;
using namespace lazycache::cli;
namespace stdfs = std::filesystem;

namespace {

// One command, in this process, with descriptors 1 and 2 captured into files (commands print
// through iostreams and stdio alike), restored even when an assertion throws.
struct Run {
  int code = -1;
  std::string out, err;
};
class Capture {
 public:
  explicit Capture(const std::string& dir) : out_file_(dir + "/stdout"), err_file_(dir + "/stderr") {
    std::fflush(nullptr);
    saved_out_ = ::dup(1);
    saved_err_ = ::dup(2);
    redirect(out_file_, 1);
    redirect(err_file_, 2);
  }
  ~Capture() { restore(); }
  Run finish(int code) {
    restore();
    return Run{code, testing::read_file(out_file_), testing::read_file(err_file_)};
  }

 private:
  static void redirect(const std::string& file, int target) {
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::dup2(fd, target) == target);
    ::close(fd);
  }
  void restore() {
    if (saved_out_ < 0) return;
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    ::dup2(saved_out_, 1);
    ::dup2(saved_err_, 2);
    ::close(saved_out_);
    ::close(saved_err_);
    saved_out_ = saved_err_ = -1;
  }
  std::string out_file_, err_file_;
  int saved_out_ = -1, saved_err_ = -1;
};
Run run(const std::vector<std::string>& args) {
  static testing::TempDir capture_dir;
  Capture capture(capture_dir.path());
  const int code = run_cli(args, CliMainOptions{.install_interrupt_handlers = false, .apply_default_config = false});
  return capture.finish(code);
}

}  // namespace

TEST_CASE("commands run in-process: pack, ls, a usage error, save and lookup with exit codes and output", "[unit]") {
  ::unsetenv("GITHUB_OUTPUT");
  ::unsetenv("LAZYCACHE_STORE");
  testing::TempDir tmp;
  const stdfs::path base = tmp.path();
  const stdfs::path tree = base / "job" / "deps", other = base / "job" / "other", archive = base / "a.tar.zst";
  stdfs::create_directories(tree / "pkg");
  testing::write_file(tree / "pkg" / "index.js", "module.exports = 42;\n");
  ::setenv("LAZYCACHE_RUN_DIR", (base / "run").c_str(), 1);

  Run packed = run({"pack", "-q", "-o", archive.string(), tree.string()});
  INFO(packed.err);
  CHECK(packed.code == 0);
  CHECK(packed.err.empty());
  REQUIRE(stdfs::exists(archive));

  Run listed = run({"ls", archive.string()});
  CHECK(listed.code == 0);
  CHECK(listed.out.find(tree.relative_path().string() + "/pkg/index.js\n") != std::string::npos);

  Run bad = run({"ls", "--bogus", archive.string()});
  CHECK(bad.code == kExitUsage);
  CHECK(bad.err.find("--bogus") != std::string::npos);
  CHECK(run({}).code == kExitUsage);
  CHECK(run({"no-such-command"}).code == kExitUsage);

  const std::string store = (base / "store").string();
  Run saved = run({"save", "--store", store, "--key", "k", tree.string()});
  CHECK(saved.code == 0);
  CHECK(saved.out.rfind("saved key k to ", 0) == 0);
  Run hit = run({"lookup", "--store", store, "--key", "k", tree.string()});
  CHECK(hit.code == 0);
  CHECK(hit.out.find("cache-hit=true\n") != std::string::npos);
  // The paths are part of the entry's identity: another path misses and says what k was saved for.
  Run miss = run({"lookup", "--store", store, "--fail-on-cache-miss", "--key", "k", other.string()});
  CHECK(miss.code == kExitNotFound);
  CHECK(miss.out.find("cache-hit=false\n") != std::string::npos);
  CHECK(miss.err.find("no entry for key k with these paths (" + other.string() + ")") != std::string::npos);
  CHECK(miss.err.find("saved for: " + tree.string() + " (--any-paths takes it)") != std::string::npos);
  ::unsetenv("LAZYCACHE_RUN_DIR");
}

TEST_CASE("the save record keeps typed store settings (format 2) and still reads format 1", "[unit]") {
  SaveRecord r;
  r.path = "/w/deps";
  r.primary_key = "npm-1";
  r.scope = "org/repo";
  r.version = "0123456789abcdef";
  r.pid = 42;
  r.base_object = "org%2Frepo/npm-0!0123456789abcdef.tar.zst";
  r.store.url = "s3://bucket/ci";
  r.store.endpoint = "http://127.0.0.1:9000";
  r.store.addressing = StoreSettings::Addressing::kPathStyle;
  r.store.sign_payload = true;
  r.store.transfer.concurrency = 3;
  r.store.transfer.part_size_bytes = 5 << 20;
  r.store.transfer.memory_budget_bytes = 64 << 20;
  r.store.transfer.max_attempts = 2;
  const std::string text = r.to_text();
  CHECK(text.rfind("format=2\n", 0) == 0);
  CHECK(text.find("store_arg") == std::string::npos);  // no argv strings to parse again
  auto back = SaveRecord::parse(text);
  REQUIRE(back.ok());
  CHECK(back->to_text() == text);
  CHECK(back->store.addressing == StoreSettings::Addressing::kPathStyle);
  CHECK(back->store.transfer.part_size_bytes == (5u << 20));
  CHECK(back->store.transfer.memory_budget_bytes == (64u << 20));
  CHECK(back->version == r.version);
  CHECK(back->base_object == r.base_object);

  // Format 1 (an older lazycache's mount, saved after an upgrade): its argv strings, parsed once.
  auto old = SaveRecord::parse(
      "path=/w/deps\nprimary_key=k\nscope=\nexact_hit=1\npid=7\nstore_arg=--store=s3://b/p\n"
      "store_arg=--memory-budget=32M\nstore_arg=--path-style\n");
  REQUIRE(old.ok());
  CHECK(old->store.url == "s3://b/p");
  CHECK(old->store.transfer.memory_budget_bytes == (32u << 20));
  CHECK(old->store.addressing == StoreSettings::Addressing::kPathStyle);
  CHECK(old->version.empty());

  CHECK(!SaveRecord::parse("format=2\npath=/w\nprimary_key=k\npart_size=lots\n").ok());  // a value that is no number
  CHECK(SaveRecord::parse("format=3\npath=/w\nprimary_key=k\n").error().code() == ErrorCode::kUnsupported);
}
