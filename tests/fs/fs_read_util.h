// SPDX-License-Identifier: MIT
// File: tests/fs/fs_read_util.h -- reading a whole file through a Filesystem by archive path,
// for the fs/ tests that check what a sequence of reads fetches.
#pragma once

#include <catch2/catch.hpp>

#include <fcntl.h>

#include <string>

#include "fs/filesystem.h"

namespace lazycache::testing {

// The content of the regular file at archive path `path` ("t/a/b"), read in one read() call as
// the kernel would for a small file. Fails the test on any error.
inline std::string read_whole(fs::Filesystem& f, const std::string& path) {
  auto id = f.index().lookup_path(path);
  INFO(path);
  REQUIRE(id.has_value());
  auto attr = f.getattr(*id);
  REQUIRE(attr.ok());
  auto handle = f.open(*id, O_RDONLY);
  REQUIRE(handle.ok());
  auto data = f.read_sync(*handle, 0, static_cast<size_t>(attr->size));
  f.release(*handle);
  INFO((data.ok() ? std::string() : data.error().to_string()));
  REQUIRE(data.ok());
  return *data;
}

}  // namespace lazycache::testing
