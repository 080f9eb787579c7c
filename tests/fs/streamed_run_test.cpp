// SPDX-License-Identifier: MIT
// A mount's range read of several frames (a fill or readahead run) hands each frame on as soon
// as its bytes are in: a reader waiting on the run's first frame gets it while the rest of the
// run is still on its way (FrameFetcher::process_run with FrameSource::read_run's `ready`).
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>

#include "fs/frame_fetcher.h"
#include "fs_test_util.h"

using namespace lazycache;
using lazycache::testing::TempDir;

namespace {

// A file source whose streamed reads wait at a start gate before their first byte, then deliver
// their first half (telling it), then wait at a halfway gate before the rest. Each gate waits at
// most 10 s and records whether it timed out.
class TwoGateSource final : public ByteSource {
 public:
  explicit TwoGateSource(std::shared_ptr<const ByteSource> inner) : inner_(std::move(inner)) {}
  ~TwoGateSource() override {
    open(start_);
    open(halfway_);
  }
  uint64_t size() const override { return inner_->size(); }
  std::string describe() const override { return "two-gate " + inner_->describe(); }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override { return inner_->read_at(offset, out); }
  Result<size_t> read_at_streaming(uint64_t offset, std::span<std::byte> out, const ReadProgress& progress) const override {
    {
      std::unique_lock lock(mu_);
      ++started_;
      cv_.notify_all();
    }
    pass(start_);
    const size_t half = out.size() / 2;
    auto first = inner_->read_at(offset, out.first(half));
    if (!first.ok()) return first;
    if (progress) progress(*first);
    pass(halfway_);
    auto rest = inner_->read_at(offset + half, out.subspan(half));
    if (!rest.ok()) return rest;
    if (progress) progress(half + *rest);
    return half + *rest;
  }

  struct Gate {
    bool open = false;
    bool timed_out = false;
  };
  // Waits (at most 10 s) until a streamed read has started.
  bool wait_started() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return started_ > 0; });
  }
  void open(Gate& g) const {
    std::lock_guard lock(mu_);
    g.open = true;
    cv_.notify_all();
  }
  bool timed_out(const Gate& g) const {
    std::lock_guard lock(mu_);
    return g.timed_out;
  }
  mutable Gate start_, halfway_;

 private:
  void pass(Gate& g) const {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return g.open; })) g.timed_out = true;
  }
  std::shared_ptr<const ByteSource> inner_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable int started_ = 0;
};

}  // namespace

TEST_CASE("a reader waiting on the first frame of a fill run gets it before the run's last byte", "[unit][concurrency]") {
  TempDir dir;
  testing::make_node_like_tree(dir / "t", 40);
  testing::pack_tree(dir.path(), {"t"}, dir / "a.tar.zst", 16 << 10);
  auto file = LocalFileSource::open(dir / "a.tar.zst");
  REQUIRE(file.ok());
  auto source = std::make_shared<TwoGateSource>(std::shared_ptr<const ByteSource>(std::move(file).value()));
  auto opened = format::ArchiveReader::open(source);
  REQUIRE(opened.ok());
  auto reader = std::move(opened).value();
  REQUIRE(reader->index().frames().size() >= 8);
  auto cache = fs::ChunkCache::open({dir / "cache", 1ull << 30});
  REQUIRE(cache.ok());
  fs::MemoryBudget budget{64ull << 20};
  fs::FrameCache memory{budget};
  fs::FetcherConfig config;
  config.threads = 2;
  config.background_threads = 1;
  config.merge_bytes_background = 1ull << 20;  // frames 0..7 in one range read
  auto fetcher = std::make_unique<fs::FrameFetcher>(*reader, *cache, memory, budget, config);

  fetcher->prefetch(0, 7, fs::Priority::kBackground);
  REQUIRE(source->wait_started());  // the fill's run is in flight, before its first byte
  std::promise<bool> got;
  auto arrived = got.get_future();
  fetcher->get(0, fs::Priority::kOnDemand, [&got](Result<fs::FetchedFrame> r) { got.set_value(r.ok()); });
  source->open(source->start_);
  // The first half of the run (frame 0 among it) is in; the rest waits at the halfway gate.
  const bool before_rest = arrived.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  source->open(source->halfway_);
  CHECK(before_rest);
  CHECK(arrived.get());
  fetcher->wait_idle();
  CHECK(!source->timed_out(source->start_));
  CHECK(fetcher->counters().store_range_reads == 1);  // one read of the run, frame 0 not read again
  fetcher.reset();
}
