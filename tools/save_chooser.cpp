// SPDX-License-Identifier: MIT
#include "tools/save_chooser.h"

#include <algorithm>
#include <cstdio>

namespace lazycache::cli {
namespace {

// The compressed size of fresh tar bytes, guessed from the base's own ratio.
double compressed_ratio(const format::IncrementalEstimate& est) {
  if (est.tree_tar_bytes == 0) return 1.0;
  return std::clamp(static_cast<double>(est.base_compressed_bytes) / static_cast<double>(est.tree_tar_bytes), 0.02, 1.0);
}

double incremental_seconds(const format::IncrementalPlanSizes& p, double ratio, const SaveCostModel& m) {
  const double fresh = static_cast<double>(p.fresh_tar_bytes);
  const double through_runner = static_cast<double>(p.reused_compressed_bytes - p.copied_compressed_bytes);
  return fresh / m.compress_bytes_per_s + static_cast<double>(p.fresh_files) * m.seconds_per_file +
         2 * through_runner / m.store_bytes_per_s + fresh * ratio / m.store_bytes_per_s +
         static_cast<double>(p.copied_compressed_bytes) / m.store_copy_bytes_per_s;
}

double full_pack_seconds(const format::IncrementalEstimate& est, double ratio, const SaveCostModel& m) {
  const double tar = static_cast<double>(est.tree_tar_bytes);
  return tar / (m.compress_bytes_per_s * std::max(1, m.threads)) + static_cast<double>(est.tree_files) * m.seconds_per_file +
         tar * ratio / m.store_bytes_per_s;
}

}  // namespace

SaveCostModel default_cost_model(int threads) {
  SaveCostModel m;
  m.threads = std::max(1, threads);
  return m;
}

SaveChoice choose_save(const format::IncrementalEstimate& est, const SaveCostModel& model) {
  using format::IncrementalChoice;
  SaveChoice c;
  const double ratio = compressed_ratio(est);
  c.reuse_s = incremental_seconds(est.reuse, ratio, model);
  c.full_s = full_pack_seconds(est, ratio, model);
  if (est.relayout) c.relayout_s = incremental_seconds(*est.relayout, ratio, model);
  char line[256];
  if (est.relayout && c.relayout_s <= c.full_s) {
    c.choice = IncrementalChoice::kRelayout;
    std::snprintf(line, sizeof line, "relayout, the job read in a new order (est. %.2f s; keeping the layout %.2f s, full pack %.2f s)",
                  c.relayout_s, c.reuse_s, c.full_s);
  } else if (c.reuse_s - c.full_s < std::max(model.full_pack_min_saving_s, model.full_pack_min_saving_fraction * c.reuse_s)) {
    c.choice = IncrementalChoice::kReuse;
    if (est.relayout)
      std::snprintf(line, sizeof line,
                    "reuse, keeping the layout (est. %.2f s; relayout %.2f s would cost more than the full pack, %.2f s)", c.reuse_s,
                    c.relayout_s, c.full_s);
    else std::snprintf(line, sizeof line, "reuse (est. %.2f s; full pack %.2f s)", c.reuse_s, c.full_s);
  } else {
    c.choice = IncrementalChoice::kFullPack;
    std::snprintf(
        line, sizeof line,
        "full pack, it costs less than building on the mounted entry (est. %.2f s; reuse %.2f s, %.1f %% of the tree to compress again)",
        c.full_s, c.reuse_s,
        est.tree_tar_bytes ? 100.0 * static_cast<double>(est.reuse.fresh_tar_bytes) / static_cast<double>(est.tree_tar_bytes) : 0.0);
  }
  c.why = line;
  return c;
}

}  // namespace lazycache::cli
