// SPDX-License-Identifier: MIT
// The kernel-request counters (fs/request_counts.h) and their place in the mount figures: every
// kind named once, counts added per kind, and the figures' text and JSON forms carrying them
// ("requests_getattr=3") through a round trip.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "fs/mount_stats.h"
#include "fs/request_counts.h"

using namespace lazycache;

TEST_CASE("request counts: one name per kind, counts per kind", "[unit]") {
  std::set<std::string> names;
  for (size_t i = 0; i < fs::kFuseRequestKinds; ++i) names.insert(fs::request_name(static_cast<fs::FuseRequest>(i)));
  CHECK(names.size() == fs::kFuseRequestKinds);
  CHECK(names.count("unknown") == 0);
  CHECK(std::string(fs::request_name(fs::FuseRequest::kGetattr)) == "getattr");

  fs::RequestCounts c;
  c.add(fs::FuseRequest::kLookup);
  c.add(fs::FuseRequest::kLookup);
  c.add(fs::FuseRequest::kForget, 40);
  const fs::RequestSnapshot s = c.snapshot();
  CHECK(s[static_cast<size_t>(fs::FuseRequest::kLookup)] == 2);
  CHECK(s[static_cast<size_t>(fs::FuseRequest::kForget)] == 40);
  CHECK(s[static_cast<size_t>(fs::FuseRequest::kGetattr)] == 0);
}

TEST_CASE("mount figures carry the request counts in text and JSON", "[unit]") {
  fs::MountStats m;
  m.reads = 5;
  m.requests[static_cast<size_t>(fs::FuseRequest::kGetattr)] = 3;
  m.requests[static_cast<size_t>(fs::FuseRequest::kReaddir)] = 11;
  const std::string text = m.to_text();
  CHECK(text.find("requests_getattr=3\n") != std::string::npos);
  CHECK(text.find("requests_lookup=0\n") != std::string::npos);
  auto back = fs::MountStats::from_text(text);
  REQUIRE(back.ok());
  CHECK(back->requests == m.requests);
  CHECK(back->reads == 5);
  CHECK(m.to_json().find("\"requests_readdir\":11") != std::string::npos);
  CHECK_FALSE(fs::MountStats::from_text("requests_open=x\n").ok());
}
