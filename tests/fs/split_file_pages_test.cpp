// SPDX-License-Identifier: MIT
// SplitFilePages (fs/split_file_pages.h): the parts of a file that span frames, given in any
// order, are offered as whole pages only, each byte once, with the straddling pages assembled
// from both sides; a refused offer is counted out; the pending pages stay within their bound.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fs/split_file_pages.h"

using lazycache::fs::SplitFilePages;

namespace {

constexpr uint64_t kPage = 4096;

std::string bytes_of(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Feeds `file` to `pages` cut at `cuts` (ascending, inside the file), the parts in `order`, and
// checks every offer: page-aligned, whole pages or up to the file's end, no byte twice, and all
// of them together the file.
void feed_and_check(SplitFilePages& pages, const std::string& file, const std::vector<uint64_t>& cuts, const std::vector<size_t>& order) {
  std::vector<uint64_t> bounds{0};
  bounds.insert(bounds.end(), cuts.begin(), cuts.end());
  bounds.push_back(file.size());
  std::map<uint64_t, std::string> offered;
  for (size_t i : order) {
    const uint64_t a = bounds[i], b = bounds[i + 1];
    pages.add(7, file.size(), a, std::span<const char>(file.data() + a, b - a), [&](uint64_t offset, std::span<const char> got) {
      INFO("offer at " << offset << ", " << got.size() << " bytes");
      CHECK(offset % kPage == 0);
      CHECK((got.size() % kPage == 0 || offset + got.size() == file.size()));
      CHECK(got.size() > 0);
      CHECK(offered.count(offset) == 0);
      offered[offset].assign(got.data(), got.size());
      return true;
    });
  }
  uint64_t next = 0;
  for (const auto& [offset, got] : offered) {
    REQUIRE(offset == next);
    REQUIRE(got == file.substr(offset, got.size()));
    next = offset + got.size();
  }
  CHECK(next == file.size());
  CHECK(pages.pending() == 0);
}

}  // namespace

TEST_CASE("split file pages: a boundary inside a page is offered once both sides came, in either order", "[unit]") {
  const std::string file = bytes_of(5 * kPage + 100, 1);
  for (const std::vector<size_t>& order : {std::vector<size_t>{0, 1}, std::vector<size_t>{1, 0}}) {
    SplitFilePages pages(16, kPage);
    feed_and_check(pages, file, {2 * kPage + 1000}, order);
  }
}

TEST_CASE("split file pages: a boundary on a page boundary needs no assembly", "[unit]") {
  const std::string file = bytes_of(4 * kPage, 2);
  SplitFilePages pages(16, kPage);
  size_t offers = 0;
  auto count = [&](uint64_t, std::span<const char>) { return ++offers, true; };
  pages.add(1, file.size(), 0, std::span<const char>(file.data(), 2 * kPage), count);
  CHECK(pages.pending() == 0);
  pages.add(1, file.size(), 2 * kPage, std::span<const char>(file.data() + 2 * kPage, 2 * kPage), count);
  CHECK(offers == 2);
}

TEST_CASE("split file pages: a part inside one page, three sides of one page, the file's short last page", "[unit]") {
  const std::string file = bytes_of(3 * kPage + 10, 3);
  // Parts: [0, 4100), [4100, 4200) (inside page 1), [4200, 12298): page 1 has three sides.
  SplitFilePages pages(16, kPage);
  feed_and_check(pages, file, {4100, 4200}, {1, 2, 0});
  // The last part starts inside the file's last (short) page.
  SplitFilePages tail(16, kPage);
  feed_and_check(tail, file, {3 * kPage + 5}, {0, 1});
}

TEST_CASE("split file pages: random cuts in random order cover the file exactly", "[unit]") {
  std::mt19937 rng(42);
  for (int round = 0; round < 200; ++round) {
    const size_t size = 1 + rng() % (20 * kPage);
    const std::string file = bytes_of(size, static_cast<uint32_t>(round));
    std::vector<uint64_t> cuts;
    const size_t n = rng() % 6;
    for (size_t i = 0; i < n && size > 1; ++i) cuts.push_back(1 + rng() % (size - 1));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::vector<size_t> order(cuts.size() + 1);
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    INFO("round " << round << ", size " << size << ", " << cuts.size() << " cuts");
    SplitFilePages pages(64, kPage);
    feed_and_check(pages, file, cuts, order);
  }
}

TEST_CASE("split file pages: refused offers are not counted; the pending pages stay within the bound", "[unit]") {
  const std::string file = bytes_of(10 * kPage, 4);
  SplitFilePages pages(2, kPage);
  auto refuse = [](uint64_t, std::span<const char>) { return false; };
  // Parts [0, 1000 + k*4096) of three files: each leaves one straddling page pending.
  CHECK(pages.add(1, file.size(), 0, std::span<const char>(file.data(), kPage + 1000), refuse) == 0);
  CHECK(pages.pending() == 1);
  pages.add(2, file.size(), 0, std::span<const char>(file.data(), kPage + 1000), refuse);
  pages.add(3, file.size(), 0, std::span<const char>(file.data(), kPage + 1000), refuse);
  CHECK(pages.pending() == 2);  // the third file's page was not kept
  // File 1's other side completes its page, offered (and taken) now.
  size_t taken = pages.add(1, file.size(), kPage + 1000, std::span<const char>(file.data() + kPage + 1000, 9 * kPage - 1000),
                           [](uint64_t, std::span<const char>) { return true; });
  CHECK(taken == 2);  // the pages after the boundary, and the straddling page
  CHECK(pages.pending() == 1);
}
