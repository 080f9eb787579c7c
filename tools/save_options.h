// SPDX-License-Identifier: MIT
// File: tools/save_options.h -- `lazycache save`'s command line as typed values, parsed once:
// the store settings (tools/store_options.h), the key, the paths and the pack options.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "format/archive_writer.h"
#include "tools/command.h"
#include "tools/store_options.h"

namespace lazycache::cli {

struct SaveOptions {
  StoreSettings store;
  std::string key, scope;
  // Absolute and normalised, in the order given: they name the members and make the entry's
  // version (remote::entry_version), as mount, restore and unmount resolve PATHs.
  std::vector<std::string> paths;
  int level = 3;                                      // --level (zstd)
  uint64_t frame_size_bytes = 4ull << 20;             // --frame-size
  int threads = 0;                                    // --threads; 0: one per CPU
  format::XattrSet xattrs = format::XattrSet::kNone;  // --xattrs: kStored
  bool json = false, quiet = false, no_trace = false;
};

// Declares save's options on `args` (call before args.parse()).
void add_save_options(ArgParser& args);
// kInvalidArgument naming the option: no --key or no PATH, a bad number or size, a part size
// below S3's 5 MiB upload minimum (checked before anything is read or sent).
Result<SaveOptions> parse_save_options(const ArgParser& args);

}  // namespace lazycache::cli
