// SPDX-License-Identifier: MIT
// StoreCopySink (tools/store_copy_sink.h) over an upload that records its parts and enforces
// S3's rule (every part but the last >= 5 MiB): bytes written and ranges copied interleave, short
// ranges and the bytes before a copy are read back so no part is too small, the object holds
// exactly the bytes asked for, and a store that refuses copies gets every byte sent.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "remote/local_dir_object_store.h"
#include "tools/store_copy_sink.h"

using namespace lazycache;
using namespace lazycache::remote;

namespace {

constexpr uint64_t kMiB = 1 << 20;

std::string pattern(uint64_t seed, uint64_t n) {
  std::string s(n, '\0');
  for (uint64_t i = 0; i < n; ++i) s[i] = static_cast<char>((seed * 131 + i * 7 + i / 4096) % 251);
  return s;
}

struct Part {
  bool copied = false;
  uint64_t bytes = 0;
};

// One copy_parts call: how many parts, at what concurrency.
struct Batch {
  size_t parts = 0;
  int concurrency = 0;
};

// Assembles the object in memory; copies read the source from the store as the server would.
class RecordingUpload final : public MultipartUpload {
 public:
  RecordingUpload(ObjectStore& store, std::vector<Part>& parts, std::string& object, bool refuse_copies, std::vector<Batch>* batches)
      : store_(store), parts_(parts), object_(object), refuse_(refuse_copies), batches_(batches) {}
  uint64_t min_part_bytes() const override { return 5 * kMiB; }
  uint64_t max_part_bytes() const override { return 5ull << 30; }
  Status upload_part(int number, std::span<const std::byte> bytes) override {
    REQUIRE(number == static_cast<int>(parts_.size()) + 1);
    parts_.push_back(Part{false, bytes.size()});
    object_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return Status();
  }
  Status copy_part(int number, const RangeRequest& source) override {
    if (refuse_) return Status(ErrorCode::kUnsupported, "UploadPartCopy: HTTP 501 NotImplemented");
    REQUIRE(number == static_cast<int>(parts_.size()) + 1);
    std::string bytes(source.length, '\0');
    auto n = store_.get_range(source, std::as_writable_bytes(std::span<char>(bytes)));
    REQUIRE(n.ok());
    REQUIRE(*n == source.length);
    parts_.push_back(Part{true, source.length});
    object_ += bytes;
    return Status();
  }
  Status copy_parts(int first_number, const std::vector<RangeRequest>& sources, int concurrency) override {
    if (batches_) batches_->push_back(Batch{sources.size(), concurrency});
    return MultipartUpload::copy_parts(first_number, sources, concurrency);
  }
  Result<ObjectInfo> complete() override {
    for (size_t i = 0; i + 1 < parts_.size(); ++i)
      if (parts_[i].bytes < min_part_bytes()) return Status(ErrorCode::kInvalidArgument, "EntityTooSmall: part " + std::to_string(i + 1));
    return ObjectInfo{"out", object_.size(), "\"e\"", 0};
  }

 private:
  ObjectStore& store_;
  std::vector<Part>& parts_;
  std::string& object_;
  bool refuse_;
  std::vector<Batch>* batches_;
};

struct Fixture {
  std::string dir;
  std::shared_ptr<LocalDirObjectStore> store;
  std::string base = pattern(1, 40 * kMiB);
  ObjectInfo base_info;
  Fixture() {
    char tmpl[] = "/tmp/lc-copy-sink.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    store = *LocalDirObjectStore::open(dir);
    auto body = std::make_shared<std::string>(base);
    size_t at = 0;
    auto info = store->put("base",
                           [body, &at](std::span<std::byte> out) -> Result<size_t> {
                             size_t n = std::min(out.size(), body->size() - at);
                             std::memcpy(out.data(), body->data() + at, n);
                             at += n;
                             return n;
                           },
                           {});
    REQUIRE(info.ok());
    base_info = *info;
  }
  ~Fixture() { std::filesystem::remove_all(dir); }
};

// A sink over a RecordingUpload of the fixture's store, copying from its "base".
struct Recorded {
  std::vector<Part> parts;
  std::vector<Batch> batches;
  std::string object;
  std::unique_ptr<cli::StoreCopySink> sink;
  Recorded(Fixture& f, bool refuse_copies, uint64_t part_bytes, int concurrency = 4)
      : sink(std::make_unique<cli::StoreCopySink>(f.store,
                                                  std::make_unique<RecordingUpload>(*f.store, parts, object, refuse_copies, &batches),
                                                  RangeRequest{"base", 0, 0, f.base_info.etag}, part_bytes, concurrency)) {}
};

Status write(cli::StoreCopySink& sink, const std::string& s) { return sink.write(std::as_bytes(std::span<const char>(s))); }

}  // namespace

TEST_CASE("store copy sink: parts of at least 5 MiB, short runs read back, exact bytes", "[copy-sink]") {
  Fixture f;
  Recorded r(f, false, 16 * kMiB);
  auto& sink = *r.sink;
  auto& parts = r.parts;
  auto& object = r.object;
  const std::string a = pattern(2, kMiB), b = pattern(3, 2 * kMiB);
  REQUIRE(write(sink, a).ok());
  REQUIRE(sink.copy_range(3, 20 * kMiB).ok());  // 1 MiB pending: 4 MiB borrowed, 8 copied first, then 8
  REQUIRE(write(sink, b).ok());
  REQUIRE(sink.copy_range(25 * kMiB, 3 * kMiB).ok());   // short, after 2 MiB pending: read back
  REQUIRE(sink.copy_range(28 * kMiB, 12 * kMiB).ok());  // 5 MiB pending go first, then a copy
  REQUIRE(sink.commit().ok());
  const std::string want = a + f.base.substr(3, 20 * kMiB) + b + f.base.substr(25 * kMiB, 15 * kMiB);
  CHECK(object == want);
  CHECK(sink.bytes_written() == want.size());
  REQUIRE(parts.size() == 5);
  CHECK((!parts[0].copied && parts[0].bytes == 5 * kMiB));
  CHECK((parts[1].copied && parts[1].bytes == 8 * kMiB));
  CHECK((parts[2].copied && parts[2].bytes == 8 * kMiB));
  CHECK((!parts[3].copied && parts[3].bytes == 5 * kMiB));
  CHECK((parts[4].copied && parts[4].bytes == 12 * kMiB));
  CHECK(sink.counts().bytes_read_back == 7 * kMiB);
  CHECK(sink.counts().bytes_copied == 28 * kMiB);
  CHECK(sink.copy_refused().empty());
}

TEST_CASE("store copy sink: a long range is copied as parts the store copies at once", "[copy-sink]") {
  Fixture f;
  Recorded r(f, false, 16 * kMiB, 4);
  REQUIRE(r.sink->copy_range(0, 40 * kMiB).ok());
  REQUIRE(write(*r.sink, "tail").ok());
  REQUIRE(r.sink->commit().ok());
  CHECK(r.object == f.base + "tail");
  // The first copy alone and short (a store that cannot copy says so there), then the other
  // 32 MiB in one batch of 4 parts for 4 copies at once.
  REQUIRE(r.batches.size() == 1);
  CHECK(r.batches[0].parts == 4);
  CHECK(r.batches[0].concurrency == 4);
  REQUIRE(r.parts.size() == 6);
  CHECK((r.parts[0].copied && r.parts[0].bytes == cli::kFirstCopyBytes));
  for (size_t i = 1; i < 5; ++i) CHECK((r.parts[i].copied && r.parts[i].bytes == 8 * kMiB));
  CHECK(r.sink->counts().parts_copied == 5);
  CHECK(r.sink->counts().bytes_read_back == 0);
}

// The bytes a server copies for `source`.
Result<std::string> read_source(ObjectStore& store, const RangeRequest& source) {
  std::string bytes(source.length, '\0');
  auto n = store.get_range(source, std::as_writable_bytes(std::span<char>(bytes)));
  if (!n.ok()) return n.error();
  return bytes;
}

// An upload that takes parts in any order (as S3's does). Each copy holds (at most 20 s) until
// `together` copies are in flight at once and a part numbered after every copy was uploaded
// meanwhile, and says whether both happened: a sink that ran its copies one after the other,
// or made the writer wait for them, times out instead. `refuse`: every copy answers 501.
class AnyOrderUpload final : public MultipartUpload {
 public:
  AnyOrderUpload(ObjectStore& store, std::map<int, std::string>& parts, int together, bool refuse = false)
      : store_(store), parts_(parts), together_(together), refuse_(refuse) {}
  uint64_t min_part_bytes() const override { return 5 * kMiB; }
  uint64_t max_part_bytes() const override { return 5ull << 30; }
  bool parts_in_any_order() const override { return true; }
  Status upload_part(int number, std::span<const std::byte> bytes) override {
    std::lock_guard lock(mu_);
    if (parts_.count(number)) return Status(ErrorCode::kInvalidArgument, "part sent twice");
    parts_[number].assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    highest_uploaded_ = std::max(highest_uploaded_, number);
    cv_.notify_all();
    return Status();
  }
  Status copy_part(int number, const RangeRequest& source) override {
    if (refuse_) return Status(ErrorCode::kUnsupported, "UploadPartCopy: HTTP 501 NotImplemented");
    {
      std::unique_lock lock(mu_);
      ++entered_;
      cv_.notify_all();
      const bool ok = cv_.wait_for(lock, std::chrono::seconds(20), [&] { return entered_ >= together_ && highest_uploaded_ > number; });
      all_overlapped_ = all_overlapped_ && ok;
    }
    auto bytes = read_source(store_, source);
    if (!bytes.ok()) return bytes.error();
    std::lock_guard lock(mu_);
    parts_[number] = std::move(bytes).value();
    return Status();
  }
  Status check_copy_sources(const std::vector<RangeRequest>& sources) override {
    std::lock_guard lock(mu_);
    checks_ += static_cast<int>(sources.size());
    return Status();
  }
  Result<ObjectInfo> complete() override {
    std::lock_guard lock(mu_);
    int expect = 1;
    for (const auto& [number, bytes] : parts_)
      if (number != expect++) return Status(ErrorCode::kInvalidArgument, "part " + std::to_string(expect - 1) + " missing");
    return ObjectInfo{"out", 0, "\"e\"", 0};
  }
  bool all_overlapped() const { return all_overlapped_ && entered_ >= together_; }
  int checks() const { return checks_; }

 private:
  ObjectStore& store_;
  std::map<int, std::string>& parts_;
  const int together_;
  const bool refuse_;
  std::mutex mu_;
  std::condition_variable cv_;
  int highest_uploaded_ = 0, entered_ = 0, checks_ = 0;
  bool all_overlapped_ = true;
};

TEST_CASE("store copy sink: where parts go in any order, all copies run at once while later parts are uploaded", "[copy-sink]") {
  Fixture f;
  std::map<int, std::string> parts;
  auto owned = std::make_unique<AnyOrderUpload>(*f.store, parts, 5);
  AnyOrderUpload& upload = *owned;
  {
    cli::StoreCopySink sink(f.store, std::move(owned), RangeRequest{"base", 0, 0, f.base_info.etag}, 16 * kMiB, 8);
    // Two ranges: 3 parts of 8 MiB and 2 of 8 MiB, all five in flight together (no first copy
    // alone, no range waiting for the one before).
    REQUIRE(sink.copy_range(0, 24 * kMiB).ok());
    REQUIRE(write(sink, pattern(8, 5 * kMiB)).ok());  // between the ranges: a part of its own
    REQUIRE(sink.copy_range(24 * kMiB, 16 * kMiB).ok());
    const std::string later = pattern(7, 16 * kMiB);
    REQUIRE(write(sink, later).ok());  // a whole part: uploaded now, while the copies wait for it
    REQUIRE(write(sink, "tail").ok());
    REQUIRE(sink.commit().ok());
    std::string object;
    for (const auto& [number, bytes] : parts) object += bytes;
    CHECK(object == f.base.substr(0, 24 * kMiB) + pattern(8, 5 * kMiB) + f.base.substr(24 * kMiB) + later + "tail");
    CHECK(sink.counts().parts_copied == 5);
    CHECK(sink.counts().bytes_copied == 40 * kMiB);
    CHECK(upload.all_overlapped());
    CHECK(upload.checks() == 1);  // the source's pin checked once for all copies
  }
}

TEST_CASE("store copy sink: where parts go in any order, a refused copy is sent by its lane", "[copy-sink]") {
  Fixture f;
  std::map<int, std::string> parts;
  {
    cli::StoreCopySink sink(f.store, std::make_unique<AnyOrderUpload>(*f.store, parts, 0, true),
                            RangeRequest{"base", 0, 0, f.base_info.etag}, 8 * kMiB, 4);
    REQUIRE(sink.copy_range(0, 30 * kMiB).ok());
    REQUIRE(write(sink, "x").ok());
    REQUIRE(sink.commit().ok());
    REQUIRE(sink.copy_range(0, 0).code() == ErrorCode::kInvalidArgument);  // committed
    std::string object;
    for (const auto& [number, bytes] : parts) object += bytes;
    CHECK(object == f.base.substr(0, 30 * kMiB) + "x");
    CHECK(sink.copy_refused().find("NotImplemented") != std::string::npos);
    CHECK(sink.counts().bytes_copied == 0);
    CHECK(sink.counts().bytes_read_back == 30 * kMiB);
  }
}

// An upload that takes parts in any order and lets a part be sent again (as S3 does: the later
// part replaces it) or discarded (MultipartUpload::discard_part). Copies block (at most 20 s)
// until release() so a test can see them in flight before the writer asks for them.
class ReplacingUpload final : public MultipartUpload {
 public:
  ReplacingUpload(ObjectStore& store, std::map<int, std::string>& parts) : store_(store), parts_(parts) {}
  uint64_t min_part_bytes() const override { return 5 * kMiB; }
  uint64_t max_part_bytes() const override { return 5ull << 30; }
  bool parts_in_any_order() const override { return true; }
  Status upload_part(int number, std::span<const std::byte> bytes) override {
    std::lock_guard lock(mu_);
    parts_[number].assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return Status();
  }
  Status copy_part(int number, const RangeRequest& source) override {
    {
      std::unique_lock lock(mu_);
      ++started_;
      cv_.notify_all();
      cv_.wait_for(lock, std::chrono::seconds(20), [&] { return released_; });
    }
    auto bytes = read_source(store_, source);
    if (!bytes.ok()) return bytes.error();
    std::lock_guard lock(mu_);
    parts_[number] = std::move(bytes).value();
    return Status();
  }
  Status discard_part(int number) override {
    std::lock_guard lock(mu_);
    parts_.erase(number);
    ++discarded_;
    return Status();
  }
  Result<ObjectInfo> complete() override {
    std::lock_guard lock(mu_);
    int expect = 1;
    for (const auto& [number, bytes] : parts_) {
      if (number != expect++) return Status(ErrorCode::kInvalidArgument, "part " + std::to_string(expect - 1) + " missing");
      if (number < static_cast<int>(parts_.size()) && bytes.size() < min_part_bytes())
        return Status(ErrorCode::kInvalidArgument, "EntityTooSmall: part " + std::to_string(number));
    }
    return ObjectInfo{"out", 0, "\"e\"", 0};
  }
  // True once `n` copies are in flight together (at most 20 s).
  bool wait_started(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return started_ >= n; });
  }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int started() {
    std::lock_guard lock(mu_);
    return started_;
  }
  int discarded() {
    std::lock_guard lock(mu_);
    return discarded_;
  }

 private:
  ObjectStore& store_;
  std::map<int, std::string>& parts_;
  std::mutex mu_;
  std::condition_variable cv_;
  int started_ = 0, discarded_ = 0;
  bool released_ = false;
};

std::string assembled(const std::map<int, std::string>& parts) {
  std::string object;
  for (const auto& [number, bytes] : parts) object += bytes;
  return object;
}

TEST_CASE("store copy sink: copies made ahead of the writer", "[copy-sink][ahead]") {
  Fixture f;
  std::map<int, std::string> parts;
  auto owned = std::make_unique<ReplacingUpload>(*f.store, parts);
  ReplacingUpload& upload = *owned;
  cli::StoreCopySink sink(f.store, std::move(owned), RangeRequest{"base", 0, 0, f.base_info.etag}, 16 * kMiB, 4);
  // 40 MiB ahead: four pieces of 10 MiB, all in flight before the writer says what it copies.
  sink.copy_ahead(0, 40 * kMiB);
  REQUIRE(upload.wait_started(4));
  const std::string tail = pattern(9, 100);
  SECTION("the writer's first range is the one guessed: every piece is used, nothing copied twice") {
    upload.release();
    REQUIRE(sink.copy_range(0, 40 * kMiB).ok());
    REQUIRE(write(sink, tail).ok());
    REQUIRE(sink.commit().ok());
    CHECK(assembled(parts) == f.base + tail);
    CHECK(upload.started() == 4);
    CHECK(upload.discarded() == 0);
    CHECK(sink.counts().bytes_copied == 40 * kMiB);
    CHECK(sink.counts().parts_copied == 4);
  }
  SECTION("a shorter first range: the pieces inside it are used, the rest discarded and their numbers sent again") {
    upload.release();
    REQUIRE(sink.copy_range(0, 25 * kMiB).ok());  // pieces 1-2 (20 MiB), then 5 MiB copied anew
    const std::string fresh = pattern(3, 6 * kMiB);
    REQUIRE(write(sink, fresh).ok());
    REQUIRE(write(sink, tail).ok());
    REQUIRE(sink.commit().ok());
    CHECK(assembled(parts) == f.base.substr(0, 25 * kMiB) + fresh + tail);
    CHECK(upload.discarded() == 2);
    CHECK(sink.counts().bytes_copied == 25 * kMiB);
  }
  SECTION("bytes written first: every piece is discarded, even those still being copied") {
    const std::string fresh = pattern(4, 6 * kMiB);
    std::thread later([&] {
      // The writer waits for the copies in flight before it sends under their numbers.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      upload.release();
    });
    REQUIRE(write(sink, fresh).ok());
    REQUIRE(sink.copy_range(10 * kMiB, 30 * kMiB).ok());
    REQUIRE(write(sink, tail).ok());
    REQUIRE(sink.commit().ok());
    later.join();
    CHECK(assembled(parts) == fresh + f.base.substr(10 * kMiB) + tail);
    CHECK(upload.discarded() == 4);
    CHECK(sink.counts().bytes_copied == 30 * kMiB);
  }
  SECTION("another start: nothing is used") {
    upload.release();
    REQUIRE(sink.copy_range(5 * kMiB, 35 * kMiB).ok());
    REQUIRE(sink.commit().ok());
    CHECK(assembled(parts) == f.base.substr(5 * kMiB));
    CHECK(upload.discarded() == 4);
  }
}

TEST_CASE("store copy sink: no copies ahead where parts go in order, or once something was written", "[copy-sink][ahead]") {
  Fixture f;
  Recorded r(f, false, 8 * kMiB);
  r.sink->copy_ahead(0, 40 * kMiB);  // the local store appends in order: nothing happens
  CHECK(r.parts.empty());
  std::map<int, std::string> parts;
  auto owned = std::make_unique<ReplacingUpload>(*f.store, parts);
  ReplacingUpload& upload = *owned;
  upload.release();
  cli::StoreCopySink sink(f.store, std::move(owned), RangeRequest{"base", 0, 0, f.base_info.etag}, 16 * kMiB, 4);
  REQUIRE(write(sink, "x").ok());
  sink.copy_ahead(0, 40 * kMiB);
  REQUIRE(sink.commit().ok());
  CHECK(upload.started() == 0);
  CHECK(assembled(parts) == "x");
}

TEST_CASE("copy pieces: one per lane, none below the minimum or above the maximum, no short last", "[copy-sink]") {
  using cli::copy_pieces;
  auto sum = [](const std::vector<uint64_t>& v) {
    uint64_t s = 0;
    for (uint64_t x : v) s += x;
    return s;
  };
  CHECK(copy_pieces(0, 5 * kMiB, 5ull << 30, 8).empty());
  CHECK(copy_pieces(7 * kMiB, 5 * kMiB, 5ull << 30, 8) == std::vector<uint64_t>{7 * kMiB});  // shorter than a piece: whole
  const auto eight = copy_pieces(800 * kMiB, 5 * kMiB, 5ull << 30, 8);
  CHECK(eight == std::vector<uint64_t>(8, 100 * kMiB));
  const auto capped = copy_pieces(800 * kMiB, 5 * kMiB, 64 * kMiB, 4);  // max_part wins over lanes
  CHECK(capped.size() == 13);
  CHECK(sum(capped) == 800 * kMiB);
  for (uint64_t n : capped) CHECK((n >= 5 * kMiB && n <= 64 * kMiB));
  const auto floor = copy_pieces(20 * kMiB + 1, 5 * kMiB, 5ull << 30, 8);  // kMinCopyPieceBytes: two, not eight
  CHECK(floor == std::vector<uint64_t>{10 * kMiB + 1, 10 * kMiB});
  CHECK(copy_pieces(12 * kMiB, 5 * kMiB, 5ull << 30, 4) == std::vector<uint64_t>{12 * kMiB});
  CHECK(cli::first_copy_bytes(9 * kMiB, 5 * kMiB) == 9 * kMiB);  // 8 MiB would leave 1 MiB: all of it
  CHECK(cli::first_copy_bytes(40 * kMiB, 5 * kMiB) == 8 * kMiB);
}

TEST_CASE("store copy sink: a store that refuses copies gets every byte sent, once said why", "[copy-sink]") {
  Fixture f;
  Recorded r(f, true, 8 * kMiB);
  auto& sink = *r.sink;
  auto& parts = r.parts;
  auto& object = r.object;
  REQUIRE(sink.copy_range(0, 30 * kMiB).ok());
  REQUIRE(write(sink, "tail").ok());
  REQUIRE(sink.commit().ok());
  CHECK(object == f.base.substr(0, 30 * kMiB) + "tail");
  CHECK(sink.copy_refused().find("NotImplemented") != std::string::npos);
  CHECK(sink.counts().bytes_copied == 0);
  for (const Part& p : parts) CHECK(!p.copied);
}

TEST_CASE("store copy sink: a replaced source fails the copy and nothing is published", "[copy-sink]") {
  Fixture f;
  auto upload = f.store->start_upload("out", PutOptions{true});
  REQUIRE(upload.ok());
  {
    cli::StoreCopySink sink(f.store, std::move(upload).value(), RangeRequest{"base", 0, 0, "\"not-the-etag\""});
    Status s = sink.copy_range(0, 10 * kMiB);
    CHECK(s.code() == ErrorCode::kPreconditionFailed);
  }
  CHECK(f.store->head("out").error().code() == ErrorCode::kNotFound);
  CHECK(std::filesystem::is_empty(f.dir + "/.lazycache-tmp"));
}
