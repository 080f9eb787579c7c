// SPDX-License-Identifier: MIT
// Extract mode under store faults: a packed tree in a MemoryObjectStore, read through
// FaultInjectingObjectStore -> RetryingObjectStore -> ObjectByteSource -> ArchiveReader ->
// extract_archive, as restore's extract path stacks them. Under every fault the extract either
// reproduces the tree exactly (after retries) or fails with an error in bounded time; a file
// that exists under its final name always has the right bytes, and no temporary is left.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/byte_sink.h"
#include "format/archive.h"
#include "format/archive_writer.h"
#include "format/extractor.h"
#include "remote/object_byte_source.h"
#include "remote/retrying_object_store.h"
#include "remote/testing/fault_injecting_object_store.h"
#include "remote/testing/memory_object_store.h"

using namespace lazycache;
using namespace lazycache::remote;
using namespace lazycache::remote::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// Collects an archive in memory (write_archive wants a ByteSink).
class StringSink final : public ByteSink {
 public:
  explicit StringSink(std::string* out) : out_(out) {}
  Status write(std::span<const std::byte> b) override {
    out_->append(reinterpret_cast<const char*>(b.data()), b.size());
    return Status();
  }
  Status commit() override { return Status(); }
  uint64_t bytes_written() const override { return out_->size(); }

 private:
  std::string* out_;
};

// Incompressible content seeded by the path, so a misplaced range is detectable and the
// archive is far larger than the tail ObjectByteSource reads at open.
std::string content_for(const std::string& name, size_t size) {
  std::string s(size, '\0');
  uint64_t x = std::hash<std::string>{}(name) | 1;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

struct Fixture {
  std::string dir;
  std::map<std::string, std::string> files;  // relative path -> content
  std::string archive;

  Fixture() {
    char tmpl[] = "/tmp/lc-extract-faults-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    fs::create_directories(dir + "/src/sub/deeper");
    const size_t sizes[] = {0, 1, 511, 4096, 65535, 65537, 200000, 700001, 3333, 131072, 90000, 12};
    int i = 0;
    for (size_t s : sizes) {
      std::string rel = (i % 3 == 0 ? "" : i % 3 == 1 ? "sub/" : "sub/deeper/") + std::string("f") + std::to_string(i) + ".bin";
      files[rel] = content_for(rel, s);
      std::ofstream(dir + "/src/" + rel, std::ios::binary) << files[rel];
      ++i;
    }
    fs::create_symlink("f0.bin", dir + "/src/link");
    StringSink sink(&archive);
    format::PackConfig config;
    config.frame_size_bytes = 64 * 1024;  // many frames, so faults land mid-file
    config.threads = 1;
    config.warn = [](const std::string&) {};
    auto st = format::write_archive({format::PackRoot{dir + "/src"}}, sink, config);
    REQUIRE(st.ok());
    REQUIRE(st->frames > 10);
  }
  ~Fixture() {
    if (!getenv("LC_KEEP_TEST_DIRS")) fs::remove_all(dir);
  }
};

struct Run {
  Status status;
  std::chrono::milliseconds took{0};
  std::string out_dir;
  std::string faults;
};

Run extract_with(Fixture& fx, const std::string& name, const std::function<void(FaultInjectingObjectStore&)>& plan) {
  auto mem = std::make_shared<MemoryObjectStore>();
  mem->put_bytes("k.tar.zst", fx.archive);
  auto faulty = std::make_shared<FaultInjectingObjectStore>(mem);
  auto retrying = std::make_shared<RetryingObjectStore>(
      faulty, RetryConfig{.max_attempts = 4, .base_delay_ms = 1, .max_delay_ms = 5, .deadline_ms = 5000});
  Run run;
  run.out_dir = fx.dir + "/out-" + name;
  fs::create_directories(run.out_dir);
  auto t0 = std::chrono::steady_clock::now();
  run.status = [&]() -> Status {
    LC_ASSIGN_OR_RETURN(auto source, ObjectByteSource::open(retrying, "k.tar.zst"));
    plan(*faulty);  // faults start after open: the data reads are what is under test
    LC_ASSIGN_OR_RETURN(auto reader, format::ArchiveReader::open(source));
    format::ExtractConfig config;
    config.targets = format::targets_under(reader->index(), run.out_dir);
    config.threads = 2;
    config.part_size_bytes = 1;  // one frame per range read: many reads for the faults to hit
    config.warn = [](const std::string&) {};
    auto st = format::extract_archive(*reader, config);
    return st.ok() ? Status() : st.error();
  }();
  run.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  run.faults = faulty->describe_faults();
  return run;
}

// Every file under out/ that exists has exactly the source bytes; nothing else is there.
// Returns how many source files were found complete.
size_t check_tree(const Fixture& fx, const Run& run) {
  size_t found = 0;
  const std::string root = run.out_dir + "/" + fs::path(fx.dir + "/src").relative_path().string();
  if (!fs::exists(root)) return 0;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    std::string rel = e.path().lexically_relative(root).string();
    struct stat st {};
    REQUIRE(lstat(e.path().c_str(), &st) == 0);
    if (S_ISLNK(st.st_mode)) {
      CHECK(rel == "link");
      continue;
    }
    if (S_ISDIR(st.st_mode)) continue;
    INFO("extracted file " << rel);
    auto it = fx.files.find(rel);
    REQUIRE(it != fx.files.end());  // no temporary or stray name left behind
    std::ifstream in(e.path(), std::ios::binary);
    std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(got == it->second);  // never wrong bytes under a final name
    ++found;
  }
  return found;
}

}  // namespace

TEST_CASE("extract under store faults: right bytes after retries, or an error, never wrong bytes", "[integration][faults]") {
  Fixture fx;
  struct Scenario {
    std::string name;
    std::function<void(FaultInjectingObjectStore&)> plan;
    bool must_succeed;
    std::vector<ErrorCode> allowed_errors;
  };
  const FaultAction unavailable{.fail = ErrorCode::kUnavailable, .message = "HTTP 503 SlowDown"};
  std::vector<Scenario> scenarios = {
      {"no_faults", [](FaultInjectingObjectStore&) {}, true, {}},
      {"transient_503_x3",
       [&](FaultInjectingObjectStore& s) {
         s.add_rule({.op = StoreOp::kGetRange, .first_call = 2, .times = 3, .key_contains = {}, .action = unavailable});
       },
       true,
       {}},
      {"stall_300ms", [](FaultInjectingObjectStore& s) { s.fail_nth(StoreOp::kGetRange, 2, FaultAction{.delay = 300ms}); }, true, {}},
      {"one_in_4_seeded",
       [&](FaultInjectingObjectStore& s) { s.set_one_in(StoreOp::kGetRange, 4, 42, unavailable); },
       false,
       {ErrorCode::kUnavailable, ErrorCode::kTimeout}},
      {"persistent_503",
       [&](FaultInjectingObjectStore& s) {
         s.add_rule({.op = StoreOp::kGetRange, .first_call = 1, .times = 0, .key_contains = {}, .action = unavailable});
       },
       false,
       {ErrorCode::kUnavailable, ErrorCode::kTimeout}},
      {"expired_credentials_403",
       [](FaultInjectingObjectStore& s) {
         s.add_rule({.op = StoreOp::kGetRange,
                     .first_call = 3,
                     .times = 0,
                     .key_contains = {},
                     .action = FaultAction{.fail = ErrorCode::kPermissionDenied, .message = "HTTP 403 ExpiredToken"}});
       },
       false,
       {ErrorCode::kPermissionDenied}},
      {"truncated_body",
       [](FaultInjectingObjectStore& s) { s.fail_nth(StoreOp::kGetRange, 2, FaultAction{.truncate_after_bytes = 100}); },
       false,
       {ErrorCode::kUnavailable, ErrorCode::kCorrupt}},
      {"flipped_bit",
       [](FaultInjectingObjectStore& s) { s.fail_nth(StoreOp::kGetRange, 2, FaultAction{.flip_body_bit = true}); },
       false,
       {ErrorCode::kCorrupt, ErrorCode::kUnavailable}},
      {"object_replaced",
       [](FaultInjectingObjectStore& s) { s.fail_nth(StoreOp::kGetRange, 2, FaultAction{.flip_etag = true}); },
       false,
       {ErrorCode::kPreconditionFailed}},
  };
  for (const auto& sc : scenarios) {
    SECTION(sc.name) {
      Run run = extract_with(fx, sc.name, sc.plan);
      INFO(sc.name << ": " << run.status.to_string() << " in " << run.took.count() << " ms; faults:\n" << run.faults);
      // Bounded: retries are capped at 4 attempts / 5 s per call; the whole extract well within.
      CHECK(run.took < 30s);
      CHECK(run.faults.empty() == (sc.name == "no_faults"));
      size_t complete = check_tree(fx, run);
      if (sc.must_succeed) {
        REQUIRE(run.status.ok());
        CHECK(complete == fx.files.size());
      } else if (!run.status.ok()) {
        CHECK(std::find(sc.allowed_errors.begin(), sc.allowed_errors.end(), run.status.code()) != sc.allowed_errors.end());
        CHECK_FALSE(run.status.message().empty());
      } else {
        CHECK(complete == fx.files.size());
      }
    }
  }
}
