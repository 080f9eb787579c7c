// SPDX-License-Identifier: MIT
// The one byte formatter (common/byte_format.h) that every layer prints sizes with.
#include <catch2/catch.hpp>

#include "common/byte_format.h"

using lazycache::human_bytes;

TEST_CASE("human_bytes: whole bytes below 1 KiB, then binary units with one decimal", "[unit]") {
  CHECK(human_bytes(0) == "0 B");
  CHECK(human_bytes(6) == "6 B");  // a tiny entry is not "0.0 MiB" (issue 18 item 11)
  CHECK(human_bytes(1023) == "1023 B");
  CHECK(human_bytes(1024) == "1.0 KiB");
  CHECK(human_bytes(1536) == "1.5 KiB");
  CHECK(human_bytes(24000000) == "22.9 MiB");  // what progress lines and restore summaries show
  CHECK(human_bytes(10ull << 30) == "10.0 GiB");
  CHECK(human_bytes(3ull << 40) == "3.0 TiB");
  CHECK(human_bytes(5000ull << 40) == "5000.0 TiB");  // no unit past TiB
}
