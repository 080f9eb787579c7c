// SPDX-License-Identifier: MIT
// CountingSource (tools/mount_daemon.h), the source every read of a mount goes through: it counts
// the reads and forwards streaming and cancel() to the source it wraps. Without the forwarding a
// mount's range reads arrived whole (the default read_at_streaming tells once, at the end) and
// its fill could not be ended at exit.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tools/mount_daemon.h"

using namespace lazycache;

namespace {

// Streams its bytes in two halves; records cancel().
class HalvesSource final : public ByteSource {
 public:
  explicit HalvesSource(std::string bytes) : bytes_(std::move(bytes)) {}
  uint64_t size() const override { return bytes_.size(); }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override { return read_at_streaming(offset, out, {}); }
  Result<size_t> read_at_streaming(uint64_t offset, std::span<std::byte> out, const ReadProgress& progress) const override {
    const size_t n = std::min<size_t>(out.size(), bytes_.size() - offset);
    std::memcpy(out.data(), bytes_.data() + offset, n / 2);
    if (progress) progress(n / 2);
    std::memcpy(out.data() + n / 2, bytes_.data() + offset + n / 2, n - n / 2);
    if (progress) progress(n);
    return n;
  }
  void cancel() const override { cancelled = true; }
  std::string describe() const override { return "halves"; }
  mutable std::atomic<bool> cancelled{false};

 private:
  std::string bytes_;
};

}  // namespace

TEST_CASE("the mount's counting source forwards streamed reads and cancel", "[unit]") {
  auto inner = std::make_shared<HalvesSource>(std::string(1000, 'x'));
  cli::CountingSource counting(inner);
  std::string buf(800, '\0');
  std::vector<size_t> told;
  auto got = counting.read_at_streaming(100, std::as_writable_bytes(std::span<char>(buf)), [&](size_t n) { told.push_back(n); });
  REQUIRE(got.ok());
  CHECK(*got == 800);
  CHECK(told == std::vector<size_t>{400, 800});  // as the inner source told them, not once at the end
  CHECK(counting.reads() == 1);
  CHECK_FALSE(inner->cancelled);
  counting.cancel();
  CHECK(inner->cancelled);
}
