// SPDX-License-Identifier: MIT
// What store management (lazycache list/delete/prune) relies on in remote/: entry_name_of()
// names the scope and key of any entry object and nothing else, and the local store records a
// use (record_access) as the file's access time, leaving the mtime and the ETag alone.
#include <sys/stat.h>

#include <fcntl.h>
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <string>

#include "remote/cache_keys.h"
#include "remote/local_dir_object_store.h"

using namespace lazycache;
using namespace lazycache::remote;

TEST_CASE("entry_name_of: scope and key of entry objects, nothing for other objects", "[unit]") {
  auto unscoped = entry_name_of("deps-1.tar.zst");
  REQUIRE(unscoped);
  CHECK(unscoped->scope.empty());
  CHECK(unscoped->key == "deps-1");
  auto scoped = entry_name_of(*entry_object_key("org/repo", "npm key", "0123456789abcdef"));
  REQUIRE(scoped);
  CHECK(scoped->scope == "org/repo");
  CHECK(scoped->key == "npm key");
  CHECK(scoped->version == "0123456789abcdef");
  CHECK(!entry_name_of("deps-1.tar"));                      // not an entry suffix
  CHECK(!entry_name_of("a/b/deps.tar.zst"));                // two segments: no scope of ours
  CHECK(!entry_name_of("%2/deps.tar.zst"));                 // a broken escape
  CHECK(!entry_name_of("%0A/deps.tar.zst"));                // a scope with a control byte
  CHECK(!entry_name_of("deps-%0Acache-hit=true.tar.zst"));  // a key with one
}

TEST_CASE("LocalDirObjectStore::record_access sets the access time only", "[unit]") {
  char tmpl[] = "/tmp/lc-entry-names.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  auto store = LocalDirObjectStore::open(dir);
  REQUIRE(store.ok());
  const std::string body = "entry";
  size_t off = 0;
  BodyReader reader = [&](std::span<std::byte> out) -> Result<size_t> {
    size_t n = std::min(out.size(), body.size() - off);
    std::memcpy(out.data(), body.data() + off, n);
    off += n;
    return n;
  };
  REQUIRE((*store)->put("k.tar.zst", reader, PutOptions{}).ok());
  const std::string path = dir + "/k.tar.zst";
  const struct timespec old_times[2] = {{1000000, 0}, {2000000, 0}};  // atime, mtime
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), old_times, 0) == 0);
  auto before = (*store)->head("k.tar.zst");
  REQUIRE(before.ok());
  CHECK(before->last_access_s == 1000000);
  CHECK(before->last_modified_s == 2000000);
  REQUIRE((*store)->record_access("k.tar.zst").ok());
  auto after = (*store)->head("k.tar.zst");
  REQUIRE(after.ok());
  CHECK(after->last_access_s > 2000000);     // now
  CHECK(after->last_modified_s == 2000000);  // the save time stays
  CHECK(after->etag == before->etag);        // reads pinned to the entry stay valid
  CHECK(!(*store)->record_access("missing.tar.zst").ok());
  CHECK(std::system(("rm -rf " + dir).c_str()) == 0);
}
