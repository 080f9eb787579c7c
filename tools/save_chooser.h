// SPDX-License-Identifier: MIT
// File: tools/save_chooser.h -- how `unmount --save` picks, per save, between building on the
// mounted entry as laid out ("reuse"), building on it with the files the job read laid out anew
// ("relayout"), and packing the whole merged view ("full pack"), so that a save never costs
// more than a full save. Pure: the sizes come from format::write_incremental_archive's plan.
//
// The estimate is a time, from sizes and a few rates (SaveCostModel): compressing tar bytes
// (one thread for an incremental save, every core for a full pack), reading a file through the
// mount, moving a byte to or from the store (reused frames the store cannot copy go down and up
// again), copying in the store. The rates are rough; what matters is that the terms a plan
// pays are counted the same way for every plan. Relayout is chosen when the job read in a new
// order and it still costs no more than a full pack (it pays off at the next mount); else reuse
// unless a full pack saves at least 1 s and 20 % (SaveCostModel); else the full pack.
#pragma once

#include <string>

#include "format/incremental_writer.h"

namespace lazycache::cli {

struct SaveCostModel {
  double compress_bytes_per_s = 120e6;  // zstd -3 on tar streams, per core
  int threads = 1;                      // cores a full pack compresses on
  double seconds_per_file = 0.5e-3;     // reading one file through the mount (FUSE round trips)
  double store_bytes_per_s = 50e6;      // a runner's link to its store, each way
  double store_copy_bytes_per_s = 1e9;  // a copy inside the store
  // The estimate is rough: a full pack must save at least this much, both ways, to be chosen
  // (below that the difference is noise, and the incremental save moves far fewer bytes).
  double full_pack_min_saving_s = 1.0;
  double full_pack_min_saving_fraction = 0.2;
};

struct SaveChoice {
  format::IncrementalChoice choice = format::IncrementalChoice::kReuse;
  double reuse_s = 0, relayout_s = 0, full_s = 0;  // the estimates (relayout_s 0: none planned)
  std::string why;                                 // "reuse: est. 0.4 s, full pack 3.1 s" and the like, for the save line
};

// The model for this machine: `threads` cores, the default rates.
SaveCostModel default_cost_model(int threads);
SaveChoice choose_save(const format::IncrementalEstimate& est, const SaveCostModel& model);

}  // namespace lazycache::cli
