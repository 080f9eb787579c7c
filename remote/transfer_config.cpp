// SPDX-License-Identifier: MIT
#include "remote/transfer_config.h"

#include <algorithm>

namespace lazycache::remote {

UploadPlan choose_upload_plan(uint64_t size_hint_bytes, const TransferConfig& config) {
  constexpr uint64_t kMiB = 1ull << 20;
  UploadPlan plan;
  uint64_t size = size_hint_bytes ? size_hint_bytes : 64ull << 30;
  if (config.part_size_bytes) {
    plan.part_size_bytes = std::clamp(config.part_size_bytes, kMinPartSize, kMaxPartSize);
  } else {
    uint64_t needed = (size + 8999) / 9000;
    needed = (needed + kMiB - 1) / kMiB * kMiB;
    plan.part_size_bytes = std::clamp<uint64_t>(std::max<uint64_t>(8 * kMiB, needed), kMinPartSize, kMaxPartSize);
  }
  plan.concurrency = config.concurrency > 0 ? config.concurrency : 4;
  // Fit (concurrency + 1) parts into the budget: fewer parallel parts first, then smaller parts
  // (never below what 10,000 parts of the hinted size need, nor below S3's minimum).
  uint64_t budget = std::max<uint64_t>(config.memory_budget_bytes, 2 * kMinPartSize);
  while (plan.concurrency > 1 && (plan.concurrency + 1) * plan.part_size_bytes > budget) --plan.concurrency;
  if (!config.part_size_bytes) {
    uint64_t floor_size = std::max<uint64_t>(kMinPartSize, (size + kMaxParts - 1) / kMaxParts);
    while (2 * plan.part_size_bytes > budget && plan.part_size_bytes / 2 >= floor_size) plan.part_size_bytes /= 2;
  }
  return plan;
}

}  // namespace lazycache::remote
