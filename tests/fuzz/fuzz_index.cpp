// SPDX-License-Identifier: MIT
// Fuzz target: Index::parse on raw index bytes, then every accessor on what it accepts (version 2
// member offsets and dead members included). The first byte picks whether the input is a raw
// index or an index frame (unwrap_index_frame first).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "format/archive.h"
#include "format/index_builder.h"
#include "tests/fuzz/fuzz_check.h"

using namespace lazycache;
using namespace lazycache::format;

namespace {

// Version 2: what parse promises about member offsets and dead members, so a reader (verify,
// the incremental writer) can walk them: block-aligned, no two members starting together, dead
// members sorted and disjoint, each before its entry's live member.
void check_members(const Index& index) {
  const uint32_t n = index.entry_count();
  if (!index.member_offset(0)) {
    if (!index.dead_members().empty()) fuzz::fail("dead members in a version 1 index", Status());
    return;
  }
  std::vector<uint64_t> starts;
  for (EntryId id = 0; id < n && id < 4096; ++id) {
    const uint64_t off = *index.member_offset(id);
    if (off == kNoMemberOffset) continue;
    if (off % 512 != 0) fuzz::fail("a member offset off a block boundary", Status());
    starts.push_back(off);
  }
  uint64_t prev_end = 0;
  for (const DeadMember& d : index.dead_members()) {
    if (d.start % 512 != 0 || d.length % 512 != 0 || d.length == 0 || d.start < prev_end || d.entry == 0 || d.entry >= n)
      fuzz::fail("a dead member out of order or out of range", Status());
    const uint64_t live = *index.member_offset(d.entry);
    if (live == kNoMemberOffset || d.start + d.length > live) fuzz::fail("a dead member after its live member", Status());
    prev_end = d.start + d.length;
    starts.push_back(d.start);
  }
  std::sort(starts.begin(), starts.end());
  if (n <= 4096 && std::adjacent_find(starts.begin(), starts.end()) != starts.end())
    fuzz::fail("two members start at one offset", Status());
}

void exercise(const Index& index) {
  const uint32_t n = index.entry_count();
  for (EntryId id = 0; id < n && id < 4096; ++id) {
    Entry e = index.entry(id);
    std::string path = index.path(id);
    auto back = index.lookup_path(path);
    if (!back) fuzz::fail("an entry's own path does not resolve", Status());
    if (e.type == EntryType::kDirectory) {
      auto kids = index.children(id);
      for (uint32_t k = 0; k < kids.count && k < 64; ++k) {
        Entry c = index.entry(kids.first + k);
        if (index.lookup(id, c.name) != kids.first + k) fuzz::fail("lookup disagrees with children", Status());
      }
    }
    if (e.type == EntryType::kRegular && e.size > 0 && !index.frames().empty()) {
      auto [first, last] = index.frames_for_range(e.data_offset, e.size);
      if (first > last || last >= index.frames().size()) fuzz::fail("frames_for_range out of range", Status());
    }
    if (e.has_xattrs) (void)index.xattrs(id);
  }
  check_members(index);
  (void)index.lookup_path("no/such/path");
  for (EntryId h : index.hot_list()) (void)index.entry(h);
  (void)index.roots();
  (void)index.totals();
  (void)index.tool_version();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string raw(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    auto unwrapped = unwrap_index_frame(std::as_bytes(std::span<const char>(raw)));
    if (!unwrapped.ok()) {
      fuzz::check_refusal("unwrap_index_frame", unwrapped.error());
      return 0;
    }
    raw = std::string(unwrapped->view());
  }
  auto index = Index::parse(std::move(raw));
  if (!index.ok()) {
    fuzz::check_refusal("Index::parse", index.error());
    return 0;
  }
  exercise(**index);
  return 0;
}
