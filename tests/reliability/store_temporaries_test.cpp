// SPDX-License-Identifier: MIT
// A put killed with SIGKILL leaves its temporary in the local-dir store: it must never be
// visible as an object, and the next put must remove it (and only the temporaries of dead
// writers or untouched for an hour).
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "remote/local_dir_object_store.h"

namespace lazycache::remote {
namespace {

namespace stdfs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (stdfs::temp_directory_path() / "lc-store-tmp-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    stdfs::remove_all(path, ec);
  }
};

std::vector<std::string> temporaries(const std::string& store) {
  std::vector<std::string> out;
  for (const auto& e : stdfs::directory_iterator(store + "/.lazycache-tmp")) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::string this_host() {
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  return host;
}

void plant(const std::string& path, bool old) {
  std::ofstream(path) << "partial";
  if (!old) return;
  struct timeval two_hours_ago[2];
  ::gettimeofday(&two_hours_ago[0], nullptr);
  two_hours_ago[0].tv_sec -= 7200;
  two_hours_ago[1] = two_hours_ago[0];
  REQUIRE(::utimes(path.c_str(), two_hours_ago) == 0);
}

Result<ObjectInfo> put_text(ObjectStore& store, const std::string& key, const std::string& text) {
  bool sent = false;
  return store.put(
      key,
      [&](std::span<std::byte> out) -> Result<size_t> {
        if (sent) return size_t{0};
        sent = true;
        std::memcpy(out.data(), text.data(), text.size());
        return text.size();
      },
      PutOptions{});
}

// Forks a writer that puts `key` and blocks mid-body; kills it with SIGKILL once its temporary
// exists. Returns the temporary's name.
std::string kill_writer_mid_put(const std::string& dir, const std::string& key) {
  const auto before = temporaries(dir);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto store = LocalDirObjectStore::open(dir);
    if (!store.ok()) ::_exit(3);
    bool sent = false;
    (void)(*store)->put(
        key,
        [&](std::span<std::byte> out) -> Result<size_t> {
          if (sent) std::this_thread::sleep_for(std::chrono::seconds(60));  // killed here
          sent = true;
          std::memset(out.data(), 'x', 4096);
          return size_t{4096};
        },
        PutOptions{});
    ::_exit(4);
  }
  std::string name;
  for (int i = 0; i < 1000 && name.empty(); ++i) {
    for (const auto& t : temporaries(dir)) {
      if (std::find(before.begin(), before.end(), t) == before.end() && stdfs::file_size(dir + "/.lazycache-tmp/" + t) > 0) name = t;
    }
    if (name.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(child, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  INFO("the killed writer's temporary");
  REQUIRE(!name.empty());
  CHECK(name.rfind(std::to_string(child) + ".", 0) == 0);
  return name;
}

TEST_CASE("a put killed mid-body leaves a temporary that is never an object and is swept by the next put") {
  TempDir dir;
  auto opened = LocalDirObjectStore::open(dir.path);
  REQUIRE(opened.ok());
  auto& store = **opened;
  REQUIRE(put_text(store, "keep/a.tar.zst", "complete").ok());

  const std::string killed = kill_writer_mid_put(dir.path, "keep/b.tar.zst");
  const std::string host = this_host();
  const std::string ours = std::to_string(::getpid()) + ".999." + host;  // a live writer: this process
  plant(dir.path + "/.lazycache-tmp/" + ours, false);
  plant(dir.path + "/.lazycache-tmp/1.1.another-host", false);  // cannot ask another host: kept
  plant(dir.path + "/.lazycache-tmp/2.1.another-host-old", true);
  plant(dir.path + "/.lazycache-tmp/legacy-name", true);

  // Never visible: not listed, not found by name, not writable through the reserved prefix.
  auto page = store.list("", "");
  REQUIRE(page.ok());
  REQUIRE(page->objects.size() == 1);
  CHECK(page->objects[0].key == "keep/a.tar.zst");
  for (const char* prefix : {".lazycache", ".lazycache-tmp/", ".lazycache-tmp/x/"}) {
    auto dot = store.list(prefix, "");
    REQUIRE(dot.ok());
    CHECK(dot->objects.empty());
  }
  auto h = store.head(".lazycache-tmp/" + killed);
  REQUIRE_FALSE(h.ok());
  CHECK(h.status().code() == ErrorCode::kNotFound);
  std::vector<std::byte> buf(16);
  auto r = store.get_range(RangeRequest{".lazycache-tmp/" + killed, 0, 4, ""}, buf);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kNotFound);
  auto p = put_text(store, ".lazycache-tmp/x", "no");
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == ErrorCode::kInvalidArgument);
  CHECK(!store.remove(".lazycache-tmp/" + killed).ok());
  CHECK(store.head("keep/b.tar.zst").status().code() == ErrorCode::kNotFound);

  // The next put sweeps the dead writer's temporary and the hour-old ones, nothing else.
  REQUIRE(put_text(store, "keep/c.tar.zst", "complete too").ok());
  CHECK(temporaries(dir.path) == sorted({"1.1.another-host", ours}));
  CHECK(store.remove_stale_temporaries() == 0);
  stdfs::remove(dir.path + "/.lazycache-tmp/" + ours);
}

TEST_CASE("remove_stale_temporaries counts what it removed") {
  TempDir dir;
  auto opened = LocalDirObjectStore::open(dir.path);
  REQUIRE(opened.ok());
  const std::string first = kill_writer_mid_put(dir.path, "k");
  // The second writer's put already swept the first one's temporary.
  const std::string second = kill_writer_mid_put(dir.path, "k");
  plant(dir.path + "/.lazycache-tmp/3.1." + this_host() + "-old", true);
  CHECK(temporaries(dir.path) == sorted({"3.1." + this_host() + "-old", second}));
  CHECK((*opened)->remove_stale_temporaries() == 2);
  CHECK(temporaries(dir.path).empty());
}

}  // namespace
}  // namespace lazycache::remote
