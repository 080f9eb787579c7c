// SPDX-License-Identifier: MIT
// saved_path_of (tools/incremental_save.h): the access list of a mount names files as the
// mounted entry does; an `unmount --save` of an entry mounted elsewhere (--any-paths) names them
// by the path it was mounted at, so the new entry's learned layout resolves.
#include <catch2/catch.hpp>

#include "tools/incremental_save.h"
#include "tools/save_record.h"

using namespace lazycache;
using cli::saved_path_of;

namespace {

cli::SaveRecord record(const std::string& path, const std::string& base_member) {
  cli::SaveRecord r;
  r.path = path;
  r.primary_key = "k";
  r.base_member = base_member;
  return r;
}

}  // namespace

TEST_CASE("saved_path_of: mounted where it was saved, every path stays", "[unit]") {
  const auto r = record("/home/runner/work/app/node_modules", "home/runner/work/app/node_modules");
  CHECK(saved_path_of(r, "home/runner/work/app/node_modules/tsc/bin/tsc") == "home/runner/work/app/node_modules/tsc/bin/tsc");
  CHECK(saved_path_of(r, "other/root/file") == "other/root/file");  // as before: kept, resolved or not by the pack
}

TEST_CASE("saved_path_of: mounted elsewhere, paths under the mounted root move to the new name", "[unit]") {
  const auto r = record("/tmp/job/node_modules", "ci/build/node_modules");
  CHECK(saved_path_of(r, "ci/build/node_modules/typescript/bin/tsc") == "tmp/job/node_modules/typescript/bin/tsc");
  CHECK(saved_path_of(r, "ci/build/node_modules") == "tmp/job/node_modules");
  CHECK(!saved_path_of(r, "ci/build/node_modules2/x").has_value());  // a prefix of a name is no parent
  CHECK(!saved_path_of(r, "ci/build/other/x").has_value());          // another record's root
}

TEST_CASE("saved_path_of: a path ending in the mounted root's name keeps it", "[unit]") {
  // member_name: a path that ends in the base member's name is saved under that name.
  const auto r = record("/srv/x/cache", "cache");
  CHECK(saved_path_of(r, "cache/a/b") == "cache/a/b");
}

TEST_CASE("saved_path_of: records without a base member keep every path", "[unit]") {
  const auto r = record("/tmp/p", "");
  CHECK(saved_path_of(r, "anything/at/all") == "anything/at/all");
}

TEST_CASE("saved_path_of: mounted at the file system root", "[unit]") {
  const auto r = record("/", "data/tree");
  CHECK(saved_path_of(r, "data/tree/a/b") == "a/b");
  CHECK(saved_path_of(r, "data/tree") == "");
}
