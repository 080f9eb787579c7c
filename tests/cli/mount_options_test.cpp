// SPDX-License-Identifier: MIT
// mount's command line parsed once into MountOptions (tools/mount_options.h, issue 19 item 4),
// and the mount `restore` makes: the same typed options as `mount` for the same flags, with no
// argv built for mount to parse again (tools/cmd_restore.h).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tools/cmd_restore.h"
#include "tools/command.h"
#include "tools/mount_options.h"
#include "tools/mount_state.h"

using namespace lazycache;
using namespace lazycache::cli;

namespace {

// `argv` declared by `declare` and parsed, then turned into MountOptions by `to_options`.
Result<MountOptions> parse_with(const std::vector<std::string>& argv, void (*declare)(ArgParser&),
                                Result<MountOptions> (*to_options)(const ArgParser&)) {
  ArgParser args("test", "", argv);
  declare(args);
  int code = 0;
  REQUIRE(args.parse(code));
  return to_options(args);
}
Result<MountOptions> parse_mount(const std::vector<std::string>& argv) { return parse_with(argv, add_mount_options, parse_mount_options); }
Result<MountOptions> parse_restore(const std::vector<std::string>& argv) {
  return parse_with(argv, add_restore_options, restore_mount_options);
}

}  // namespace

TEST_CASE("mount options: every field from one parse of the command line", "[unit][cli]") {
  auto o = parse_mount({"--store",
                        "/tmp/lc-store",
                        "--key",
                        "k1",
                        "--restore-keys",
                        "p1\np2",
                        "--scope",
                        "s",
                        "--any-paths",
                        "--prefetch",
                        "/tmp/list",
                        "--fill",
                        "512M",
                        "--cache-dir",
                        "/tmp/chunks",
                        "--cache-size",
                        "2G",
                        "--memory-budget",
                        "64M",
                        "--upload-budget",
                        "32M",
                        "--fetch-threads",
                        "4",
                        "--read-timeout",
                        "7",
                        "--concurrency",
                        "3",
                        "--part-size",
                        "8M",
                        "--retries",
                        "2",
                        "--path-style",
                        "--upper-dir",
                        "rel/upper",
                        "--foreground",
                        "--json",
                        "--fail-on-cache-miss",
                        "--allow-nonempty",
                        "a",
                        "/abs/b"});
  REQUIRE(o.ok());
  CHECK(o->archive.empty());
  CHECK(o->store.url == "/tmp/lc-store");
  CHECK(o->store.addressing == StoreSettings::Addressing::kPathStyle);
  CHECK(o->store.transfer.concurrency == 3);
  CHECK(o->store.transfer.part_size_bytes == 8ull << 20);
  CHECK(o->store.transfer.max_attempts == 2);
  CHECK(o->store.transfer.memory_budget_bytes == 32ull << 20);  // --upload-budget: what unmount --save uploads within
  CHECK(o->memory_budget_bytes == 64ull << 20);                 // --memory-budget: frame memory
  CHECK(o->key == KeyOptions{"k1", "s", {"p1", "p2"}, true});
  CHECK(o->paths == std::vector<std::string>{absolute_path("a"), "/abs/b"});
  CHECK(o->prefetch == fs::PrefetchMode::kHotList);
  CHECK(o->prefetch_list == "/tmp/list");
  CHECK(o->fill == fs::FillPolicy{fs::FillPolicy::Mode::kBytes, 512ull << 20});
  CHECK(o->cache_dir == "/tmp/chunks");
  CHECK(o->cache_size_bytes == 2ull << 30);
  CHECK(o->fetch_threads == 4);
  CHECK(o->read_timeout_ms == 7000);
  CHECK(o->upper_dir == absolute_path("rel/upper"));
  CHECK(o->foreground);
  CHECK(o->json);
  CHECK(o->fail_on_cache_miss);
  CHECK(o->allow_nonempty);
  CHECK_FALSE(o->allow_other);
  CHECK_FALSE(o->read_only);
  CHECK(o->writable_mount());
}

TEST_CASE("mount options: --memory-budget auto or a size above zero", "[unit][cli]") {
  auto a = parse_mount({"--archive", "/tmp/x.lcz", "--memory-budget", "auto"});
  REQUIRE(a.ok());
  CHECK(a->memory_budget_bytes == 0);
  auto s = parse_mount({"--archive", "/tmp/x.lcz", "--memory-budget", "48M"});
  REQUIRE(s.ok());
  CHECK(s->memory_budget_bytes == 48ull << 20);
  for (const char* bad : {"0", "lots", ""}) {
    auto b = parse_mount({"--archive", "/tmp/x.lcz", "--memory-budget", bad});
    REQUIRE_FALSE(b.ok());
    CHECK(b.error().message().find("--memory-budget") != std::string::npos);
  }
}

TEST_CASE("mount options: the declared defaults, and the archive mount's writability", "[unit][cli]") {
  auto o = parse_mount({"--archive", "/tmp/x.lcz", "--prefetch", "none", "--fill", "all"});
  REQUIRE(o.ok());
  CHECK(o->archive == "/tmp/x.lcz");
  CHECK(o->prefetch == fs::PrefetchMode::kNone);
  CHECK(o->prefetch_list.empty());
  CHECK(o->fill.mode == fs::FillPolicy::Mode::kAll);
  CHECK(o->cache_size_bytes == 10ull << 30);
  CHECK(o->memory_budget_bytes == 0);  // auto: sized from the archive (fs::auto_memory_budget)
  CHECK(o->fetch_threads == 16);
  CHECK(o->read_timeout_ms == 30000);
  CHECK_FALSE(o->writable_mount());  // a local archive is read-only unless --writable
  auto w = parse_mount({"--archive", "/tmp/x.lcz", "--writable"});
  REQUIRE(w.ok());
  CHECK(w->writable_mount());
  auto r = parse_mount({"--key", "k", "--read-only"});
  REQUIRE(r.ok());
  CHECK_FALSE(r->writable_mount());
  // default_mount_options() is an empty command line: what a bare `mount --key k` gets.
  auto bare = parse_mount({"--key", "k"});
  REQUIRE(bare.ok());
  MountOptions defaults = default_mount_options();
  defaults.key.key = "k";
  CHECK(*bare == defaults);
}

TEST_CASE("mount options: bad command lines are kInvalidArgument naming what failed", "[unit][cli]") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{}, "--key"},
      {{"--key", "k", "--archive", "/tmp/a"}, "--archive"},
      {{"--key", "k", "--fetch-threads", "0"}, "--fetch-threads"},
      {{"--key", "k", "--fetch-threads", "257"}, "--fetch-threads"},
      {{"--key", "k", "--read-timeout", "0"}, "--read-timeout"},
      {{"--key", "k", "--fill", "lots"}, "--fill"},
      {{"--key", "k", "--cache-size", "big"}, "--cache-size"},
      {{"--key", "k", "--path-style", "--virtual-hosted"}, "--path-style"},
      {{"--key", "k", "--concurrency", "0"}, "--concurrency"},
  };
  for (const auto& [argv, named] : bad) {
    INFO(named);
    auto o = parse_mount(argv);
    REQUIRE_FALSE(o.ok());
    CHECK(o.error().code() == ErrorCode::kInvalidArgument);
    CHECK(o.error().message().find(named) != std::string::npos);
  }
  // Store options are not parsed for a local archive (it opens no store), as before.
  CHECK(parse_mount({"--archive", "/tmp/a", "--concurrency", "0"}).ok());
}

TEST_CASE("restore mounts with the same options as mount for the same flags", "[unit][cli]") {
  const std::vector<std::vector<std::string>> lines = {
      {"--key", "k"},
      {"--store",
       "s3://bucket/prefix",
       "--endpoint",
       "http://127.0.0.1:9",
       "--region",
       "eu-west-1",
       "--virtual-hosted",
       "--sign-payload",
       "--concurrency",
       "5",
       "--part-size",
       "16M",
       "--retries",
       "9",
       "--memory-budget",
       "48M",
       "--key",
       "k2",
       "--restore-keys",
       "a-",
       "--restore-keys",
       "b-",
       "--scope",
       "repo",
       "--any-paths",
       "--json",
       "--fail-on-cache-miss",
       "x",
       "/y/z"},
      {"--store", "/tmp/st", "--key", "k3", "--path-style", "--", "-dash"},
  };
  for (const auto& argv : lines) {
    auto from_mount = parse_mount(argv);
    auto from_restore = parse_restore(argv);
    REQUIRE(from_mount.ok());
    REQUIRE(from_restore.ok());
    CHECK(*from_restore == *from_mount);
  }
  // A restore-only option changes nothing of the mount.
  auto plain = parse_restore({"--key", "k"});
  auto with_threads = parse_restore({"--key", "k", "--threads", "3", "--mode", "mount"});
  REQUIRE(plain.ok());
  REQUIRE(with_threads.ok());
  CHECK(*plain == *with_threads);
  // A bad store option is an error here, not an argv that mount fails to parse.
  auto bad = parse_restore({"--key", "k", "--path-style", "--virtual-hosted"});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code() == ErrorCode::kInvalidArgument);
}
