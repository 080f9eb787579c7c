// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "common/posix_files.h"

using namespace lazycache;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/lc-posix-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { ignore_status(std::system(("rm -rf '" + path + "'").c_str())); }
  static void ignore_status(int) {}
};

int open_fds() { return static_cast<int>(list_dir("/proc/self/fd").size()); }

}  // namespace

// Issue 19: replace_file wrote PATH.tmp.<pid>, one name for every thread of the process. The
// mount daemon writes its access list from a timer thread and from the SIGUSR1 path: one could
// unlink or rename the other's half-written temp file, so a write failed (O_EXCL: EEXIST, or
// ENOENT at rename) or a torn file was renamed into place.
TEST_CASE("replace_file from many threads at once: every call succeeds and the file is always whole", "[unit]") {
  TempDir dir;
  const std::string path = dir.path + "/access.list";
  constexpr int kThreads = 6, kRounds = 150;
  std::atomic<int> failures{0}, torn{0};
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done) {
      auto bytes = read_whole_file(path, 1 << 20);
      if (!bytes.ok()) continue;  // not there yet
      // Each writer's content is one byte repeated: a mix of two is torn.
      if (bytes->empty() || bytes->find_first_not_of((*bytes)[0]) != std::string::npos) ++torn;
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      const std::string content(64 << 10, static_cast<char>('a' + t));
      for (int i = 0; i < kRounds; ++i) {
        if (!replace_file(path, content, 0600).ok()) ++failures;
      }
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  reader.join();
  CHECK(failures == 0);
  CHECK(torn == 0);
  CHECK(list_dir(dir.path) == std::vector<std::string>{"access.list"});  // no temp file left
}

TEST_CASE("unique_temp_name never repeats within the process", "[unit]") {
  CHECK(unique_temp_name("/x/f") != unique_temp_name("/x/f"));
  CHECK(unique_temp_name("/x/f").rfind("/x/f.tmp." + std::to_string(::getpid()) + ".", 0) == 0);
}

TEST_CASE("write_all, write_new_file and read_whole_file: limits, errors name the path, no descriptor leaks", "[unit]") {
  TempDir dir;
  const int fds = open_fds();
  const std::string path = dir.path + "/f";
  const std::string content(200000, 'z');
  REQUIRE(write_new_file(path, std::as_bytes(std::span(content.data(), content.size()))).ok());
  auto again = write_new_file(path, {});
  REQUIRE(!again.ok());
  CHECK(again.message().find(path) != std::string::npos);
  auto back = read_whole_file(path, content.size());
  REQUIRE(back.ok());
  CHECK(*back == content);
  auto limited = read_whole_file(path, content.size() - 1);
  REQUIRE(!limited.ok());
  CHECK(limited.error().code() == ErrorCode::kCorrupt);
  CHECK(read_whole_file(dir.path + "/missing", 10).error().code() == ErrorCode::kNotFound);
  {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
    REQUIRE(fd.valid());
    REQUIRE(write_all(fd.get(), "tail", "append to " + path).ok());
  }
  CHECK(read_whole_file(path, 1 << 20)->size() == content.size() + 4);
  CHECK(make_dirs(dir.path + "/a/b/c").ok());
  CHECK(make_dirs(path).code() == ErrorCode::kIo);  // a file, not a directory
  CHECK(open_fds() == fds);
}
