// SPDX-License-Identifier: MIT
// File: tests/format/archive_test_util.h -- pack a tree to a file and open it, for format tests.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "common/byte_sink.h"
#include "common/byte_source.h"
#include "format/archive.h"
#include "format/archive_writer.h"
#include "format/extractor.h"

namespace lazycache::testing {

// Packs `paths` (relative to `cwd`) into `archive`; fails the test on error.
inline format::PackStats pack_paths(const std::string& cwd, const std::vector<std::string>& paths, const std::string& archive,
                                    format::PackConfig config = {}) {
  char old[4096];
  REQUIRE(::getcwd(old, sizeof old) != nullptr);
  REQUIRE(::chdir(cwd.c_str()) == 0);
  std::vector<format::PackRoot> roots;
  for (const auto& p : paths) roots.push_back(format::PackRoot{p});
  auto sink = LocalFileSink::create(archive);
  REQUIRE(sink.ok());
  if (!config.warn) config.warn = [](const std::string&) {};
  auto stats = format::write_archive(roots, **sink, config);
  REQUIRE(::chdir(old) == 0);
  INFO((stats.ok() ? std::string() : stats.error().to_string()));
  REQUIRE(stats.ok());
  return *stats;
}

inline std::unique_ptr<format::ArchiveReader> open_archive(const std::string& archive) {
  auto src = LocalFileSource::open(archive);
  REQUIRE(src.ok());
  auto reader = format::ArchiveReader::open(std::shared_ptr<const ByteSource>(std::move(src).value()));
  INFO((reader.ok() ? std::string() : reader.error().to_string()));
  REQUIRE(reader.ok());
  return std::move(reader).value();
}

inline Result<format::ExtractStats> extract_to(const format::ArchiveReader& reader, const std::string& dir,
                                               format::ExtractConfig config = {}) {
  config.targets = format::targets_under(reader.index(), dir);
  if (!config.warn) config.warn = [](const std::string&) {};
  return format::extract_archive(reader, config);
}

}  // namespace lazycache::testing
