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

TEST_CASE("quote_path escapes the C1 controls in their UTF-8 form") {
  // U+009B is a CSI to terminals that honour C1 controls; U+00A0 and beyond are text.
  CHECK(quote_path("a\xc2\x9b"
                   "2Jb") == "'a\\xc2\\x9b2Jb'");
  CHECK(quote_path("\xc2\xa0\xc3\xbc") == "'\xc2\xa0\xc3\xbc'");
}

TEST_CASE("quote_path_if_needed leaves ordinary names as they are") {
  CHECK(quote_path_if_needed("src/main.cpp") == "src/main.cpp");
  CHECK(quote_path_if_needed("dir with space/ü.txt") == "dir with space/ü.txt");
  CHECK(quote_path_if_needed("") == "");
  CHECK(quote_path_if_needed("fake\nlazycache: line") == "'fake\\nlazycache: line'");
  CHECK(quote_path_if_needed("\x1b]0;title\x07") == "'\\x1b]0;title\\x07'");
  CHECK(quote_path_if_needed("it's") == "'it\\'s'");                              // a quote would make the output ambiguous
  CHECK(quote_path_if_needed(std::string(5000, 'x')) == std::string(5000, 'x'));  // listings are not cut
}

}  // namespace lazycache::format
