// SPDX-License-Identifier: MIT
#include "fs/mount_stats.h"

#include <array>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace lazycache::fs {
namespace {

// "requests_lookup", ...: built once, so the names outlive every use.
const char* request_field_name(size_t i) {
  static const std::array<std::string, kFuseRequestKinds> kNames = [] {
    std::array<std::string, kFuseRequestKinds> n;
    for (size_t k = 0; k < kFuseRequestKinds; ++k) n[k] = std::string("requests_") + request_name(static_cast<FuseRequest>(k));
    return n;
  }();
  return kNames[i].c_str();
}

// The one list of fields, so the text, JSON and parser forms never disagree.
template <typename S, typename F>
void for_each_field(S& s, F&& f) {
  f("archive_bytes", s.archive_bytes);
  f("archive_frames", s.archive_frames);
  f("mount_range_reads", s.mount_range_reads);
  f("store_range_reads", s.store_range_reads);
  f("store_bytes", s.store_bytes);
  f("frames_from_store", s.frames_from_store);
  f("frames_from_chunk_cache", s.frames_from_chunk_cache);
  f("frames_from_memory", s.frames_from_memory);
  f("prefetched_frames", s.prefetched_frames);
  f("fill_target_bytes", s.fill_target_bytes);
  f("fill_bytes", s.fill_bytes);
  f("frames_pending", s.frames_pending);
  f("on_demand_bytes", s.on_demand_bytes);
  f("chunk_cache_bad", s.chunk_cache_bad);
  f("frames_spilled", s.frames_spilled);
  f("frames_decoded", s.frames_decoded);
  f("readahead_stored", s.readahead_stored);
  f("frames_decoded_ahead", s.frames_decoded_ahead);
  f("decode_ahead_bytes", s.decode_ahead_bytes);
  f("files_to_page_cache", s.files_to_page_cache);
  f("frames_to_page_cache", s.frames_to_page_cache);
  f("files_to_page_cache_late", s.files_to_page_cache_late);
  f("split_pieces_to_page_cache", s.split_pieces_to_page_cache);
  f("fetch_errors", s.fetch_errors);
  f("files_opened", s.files_opened);
  f("open_handles", s.open_handles);
  f("reads", s.reads);
  f("bytes_served", s.bytes_served);
  f("read_errors", s.read_errors);
  f("read_timeouts", s.read_timeouts);
  f("memory_used_bytes", s.memory_used_bytes);
  f("memory_budget_bytes", s.memory_budget_bytes);
  f("memory_peak_bytes", s.memory_peak_bytes);
  f("warm_entries", s.warm_entries);
  f("warm_directories", s.warm_directories);
  f("warm_ms", s.warm_ms);
  f("warm_active", s.warm_active);
  for (size_t i = 0; i < kFuseRequestKinds; ++i) f(request_field_name(i), s.requests[i]);
}

}  // namespace

std::string MountStats::to_text() const {
  std::ostringstream out;
  for_each_field(*this, [&](const char* k, uint64_t v) { out << k << "=" << v << "\n"; });
  out << "uptime_ms=" << static_cast<uint64_t>(uptime_seconds * 1000) << "\n";
  return out.str();
}

Result<MountStats> MountStats::from_text(const std::string& text) {
  MountStats s;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    const bool digits = !value.empty() && value.size() <= 19 && value.find_first_not_of("0123456789") == std::string::npos;
    bool known = key == "uptime_ms";
    for_each_field(s, [&](const char* k, uint64_t&) { known = known || key == k; });
    if (!known) continue;
    if (!digits) return Status(ErrorCode::kCorrupt, "mount figures: bad value for " + key);
    const uint64_t n = std::stoull(value);
    if (key == "uptime_ms") s.uptime_seconds = static_cast<double>(n) / 1000.0;
    for_each_field(s, [&](const char* k, uint64_t& v) {
      if (key == k) v = n;
    });
  }
  return s;
}

std::string MountStats::to_json() const {
  std::ostringstream out;
  out << "{";
  bool first = true;
  for_each_field(*this, [&](const char* k, uint64_t v) {
    out << (first ? "" : ",") << "\"" << k << "\":" << v;
    first = false;
  });
  out << ",\"uptime_seconds\":" << uptime_seconds << "}";
  return out.str();
}

}  // namespace lazycache::fs
