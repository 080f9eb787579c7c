// SPDX-License-Identifier: MIT
// Fuzz target: SeekTable::frame_bytes_from_footer and SeekTable::parse on untrusted tails.
// The input is the whole object; it is parsed as its own tail and as a tail of a larger object.
#include <cstddef>
#include <cstdint>
#include <span>

#include "format/seek_table.h"
#include "tests/fuzz/fuzz_check.h"

using namespace lazycache;
using namespace lazycache::format;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = std::as_bytes(std::span<const uint8_t>(data, size));
  auto n = SeekTable::frame_bytes_from_footer(bytes);
  if (!n.ok()) fuzz::check_refusal("frame_bytes_from_footer", n.error());
  for (uint64_t object_size : {uint64_t{size}, uint64_t{size} + 4096}) {
    auto st = SeekTable::parse(bytes, object_size);
    if (!st.ok()) {
      fuzz::check_refusal("SeekTable::parse", st.error());
      continue;
    }
    // Accepted: the frames and the table must exactly fill the object.
    uint64_t c = 0;
    for (const auto& f : st->frames()) {
      if (f.compressed_offset != c || f.uncompressed_size > kMaxFrameUncompressedBytes) fuzz::fail("accepted a bad frame", Status());
      c += f.compressed_size;
    }
    if (c + st->table_frame_bytes() != object_size) fuzz::fail("accepted a table that does not fill the object", Status());
    (void)st->uncompressed_bytes();
  }
  return 0;
}
