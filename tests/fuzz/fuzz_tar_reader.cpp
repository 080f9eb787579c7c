// SPDX-License-Identifier: MIT
// Fuzz target: TarReader over an untrusted tar stream (all members, all data), plus the header,
// pax-record and pax-time parsers on the same bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "format/tar.h"
#include "tests/fuzz/fuzz_check.h"

using namespace lazycache;
using namespace lazycache::format;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t pos = 0;
  TarReader reader([&](std::span<std::byte> out) -> Result<size_t> {
    size_t n = std::min(out.size(), size - pos);
    if (n) std::memcpy(out.data(), data + pos, n);
    pos += n;
    return n;
  });
  std::byte buf[4096];
  for (int members = 0; members < 10000; ++members) {
    auto m = reader.next();
    if (!m.ok()) {
      fuzz::check_refusal("TarReader::next", m.error());
      break;
    }
    if (!m->has_value()) break;
    for (;;) {
      auto n = reader.read_data(buf);
      if (!n.ok()) {
        fuzz::check_refusal("TarReader::read_data", n.error());
        break;
      }
      if (*n == 0) break;
    }
  }
  if (size >= kTarBlock) {
    auto h = parse_tar_header(std::as_bytes(std::span<const uint8_t>(data, kTarBlock)));
    if (!h.ok()) fuzz::check_refusal("parse_tar_header", h.error());
  }
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto recs = parse_pax_records(text);
  if (!recs.ok()) fuzz::check_refusal("parse_pax_records", recs.error());
  auto t = parse_pax_time(text.substr(0, 64));
  if (!t.ok()) fuzz::check_refusal("parse_pax_time", t.error());
  return 0;
}
