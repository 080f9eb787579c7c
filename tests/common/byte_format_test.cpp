// SPDX-License-Identifier: MIT
// The one byte formatter (common/byte_format.h) that every layer prints sizes with, against the
// table the GitHub Action's formatBytes is tested with too (byte_format_cases.txt).
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <string>

#include "common/byte_format.h"

using lazycache::human_bytes;

TEST_CASE("human_bytes prints every row of the shared table (byte_format_cases.txt)", "[unit]") {
  std::ifstream in(LC_BYTE_FORMAT_CASES);
  REQUIRE(in.good());
  int rows = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    const uint64_t bytes = std::stoull(line.substr(0, tab));
    INFO("row: " << line);
    CHECK(human_bytes(bytes) == line.substr(tab + 1));
    ++rows;
  }
  CHECK(rows >= 10);  // the table was read, not skipped
}
