// SPDX-License-Identifier: MIT
// quote_path: how archive paths appear in error messages.
#include "format/quote.h"

#include <catch2/catch.hpp>
#include <string>

namespace lazycache::format {

TEST_CASE("quote_path escapes what could hide in or rewrite a terminal") {
  CHECK(quote_path("a/b c/ü.txt") == "'a/b c/ü.txt'");
  CHECK(quote_path(std::string("x\0y", 3)) == "'x\\x00y'");
  CHECK(quote_path("line\nbreak\ttab") == "'line\\nbreak\\ttab'");
  CHECK(quote_path("\x1b[2Jclear\x7f") == "'\\x1b[2Jclear\\x7f'");
  CHECK(quote_path("it's a\\b") == "'it\\'s a\\\\b'");
  CHECK(quote_path("") == "''");
}

TEST_CASE("quote_path keeps the head and the tail of a long path") {
  const std::string path = "top/" + std::string(5000, 'm') + "/leaf.txt";
  const std::string q = quote_path(path, 100);
  CHECK(q.size() == 100 + 2 + 3);
  CHECK(q.rfind("'top/", 0) == 0);
  CHECK(q.find("...") != std::string::npos);
  CHECK(q.substr(q.size() - 10) == "/leaf.txt'");
}

}  // namespace lazycache::format
