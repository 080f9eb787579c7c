// SPDX-License-Identifier: MIT
// Fuzz target: ArchiveReader::open on a whole untrusted object, then reading every regular
// file through read_file (frame verification, decompression bounds, digests).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "format/archive.h"
#include "tests/fuzz/fuzz_check.h"

using namespace lazycache;
using namespace lazycache::format;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto source = std::make_shared<MemorySource>(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  auto reader = ArchiveReader::open(source);
  if (!reader.ok()) {
    fuzz::check_refusal("ArchiveReader::open", reader.error());
    return 0;
  }
  const Index& index = (*reader)->index();
  std::string buf(64 * 1024, '\0');
  for (EntryId id = 0; id < index.entry_count() && id < 256; ++id) {
    Entry e = index.entry(id);
    if (e.type != EntryType::kRegular) continue;
    auto n = (*reader)->read_file(id, 0, std::as_writable_bytes(std::span<char>(buf)));
    if (!n.ok()) fuzz::check_refusal("read_file", n.error());
  }
  return 0;
}
