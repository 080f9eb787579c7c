// SPDX-License-Identifier: MIT
// File: remote/transfer_config.h -- TransferConfig (concurrency, part size, memory budget,
// timeouts) and the pure `auto` policy that picks an upload plan from the archive size.
#pragma once

#include <cstdint>

namespace lazycache::remote {

struct TransferConfig {
  int concurrency = 0;           // simultaneous requests of one transfer; 0 = auto
  uint64_t part_size_bytes = 0;  // multipart part size; 0 = auto
  // Upload memory: a multipart upload holds up to concurrency + 1 parts in memory. 256 MiB fits
  // CI runners (7 GiB+) next to the build with room to spare.
  uint64_t memory_budget_bytes = 256ull << 20;
  int connect_timeout_ms = 10'000;
  // Stall detection: a transfer slower than low_speed_bytes_per_s for low_speed_time_s fails
  // (kUnavailable) and is retried. 20 s: long enough for a loaded 2-core runner, short enough
  // that a dead connection does not hold a FUSE read for minutes.
  int low_speed_time_s = 20;
  int low_speed_bytes_per_s = 1024;
  int max_attempts = 5;  // per request, for the retry policy
  bool operator==(const TransferConfig&) const = default;
};

struct UploadPlan {
  uint64_t part_size_bytes = 0;
  int concurrency = 1;
};

// S3 limits: parts are 5 MiB..5 GiB, at most 10,000 per upload.
inline constexpr uint64_t kMinPartSize = 5ull << 20;
inline constexpr uint64_t kMaxPartSize = 5ull << 30;
inline constexpr uint32_t kMaxParts = 10'000;

// The auto policy (pure): part size 8 MiB (AWS's range guidance, and enough parts to overlap
// compression with upload), grown so the upload needs at most 9,000 parts (room for a size
// hint that is an underestimate; unknown size assumes 64 GiB); concurrency 4 (both test servers
// and S3 over one NIC saturate around 4 streams per client on 2 cores); then both are lowered
// until (concurrency + 1) x part size fits the memory budget. Explicit values are kept but
// clamped to the S3 limits. Never returns concurrency < 1 or a part size < kMinPartSize.
UploadPlan choose_upload_plan(uint64_t size_hint_bytes, const TransferConfig& config);

}  // namespace lazycache::remote
