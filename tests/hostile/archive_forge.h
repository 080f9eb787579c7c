// SPDX-License-Identifier: MIT
// File: tests/hostile/archive_forge.h -- ArchiveForge builds lazycache archives in memory from a
// hand-made tree, with hooks to break any layer on the way: names the writer would never emit,
// index fields, frame tables, the seek table, frame bytes. Test-only: it uses format/'s
// serialisers directly (serialize_index, build_index_frame, SeekTable::serialize), so the
// archives are byte-exact lazycache archives except for what a test deliberately breaks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "format/index_builder.h"
#include "format/seek_table.h"

namespace lazycache::hostile {

// Each hook runs at its stage of build() and may change anything it is given.
struct ForgeHooks {
  // After file data offsets and frames are known, before the index is serialised.
  std::function<void(format::IndexModel&)> on_model;
  // On the serialised raw index (before its checksum is recomputed when recompute_checksum).
  std::function<void(std::string& raw_index)> on_raw_index;
  bool recompute_index_checksum = true;
  // On the index frame bytes (skippable header + container).
  std::function<void(std::string& index_frame)> on_index_frame;
  // On the seek-table entries (data frames, then the index frame) before serialising.
  std::function<void(std::vector<format::SeekEntry>&)> on_seek_entries;
  // On the compressed data frames, first of all hooks: the tables and digests are computed
  // from what it leaves, so a replaced frame is consistent with every table.
  std::function<void(std::vector<std::string>&)> on_compressed_frames;
  // On the whole object at the end.
  std::function<void(std::string& object)> on_object;
};

class ArchiveForge {
 public:
  // The synthetic top directory is node 0; one root ("data", saved from `original_path`) is
  // node 1 under it.
  explicit ArchiveForge(std::string original_path = "/hostile/data");

  uint32_t root() const { return 1; }
  uint32_t add_dir(uint32_t parent, std::string name, uint32_t mode = 0755);
  uint32_t add_file(uint32_t parent, std::string name, std::string content, uint32_t mode = 0644);
  uint32_t add_symlink(uint32_t parent, std::string name, std::string target);
  // A hardlink sharing `leader`'s data (leader must be a file added before).
  uint32_t add_hardlink(uint32_t parent, std::string name, uint32_t leader);

  format::IndexModel& model() { return model_; }

  // The archive bytes. frame_bytes: target uncompressed frame size (cut anywhere, like a large
  // file split across frames). Errors: whatever the serialisers return.
  Result<std::string> build(const ForgeHooks& hooks, uint64_t frame_bytes = 64 * 1024) const;
  Result<std::string> build() const { return build(ForgeHooks{}); }

  // Entry id (as serialised: breadth-first, children sorted by name) of each node index.
  std::vector<uint32_t> entry_ids() const;
  // Overwrites a little-endian field of entry `entry_id` in raw index bytes. Record field
  // offsets (docs/archive-format.md, Index v1): 0 parent, 20 nlink, 32 size, 40 data_offset,
  // 48 link_group, 68 first_child, 72 child_count.
  static void patch_entry(std::string& raw_index, uint32_t entry_id, size_t field_offset, uint64_t value, int width);
  // Replaces the index's trailing XXH3-64 after a raw edit.
  static void fix_index_checksum(std::string& raw_index);

 private:
  uint32_t add(uint32_t parent, format::IndexNode node);
  format::IndexModel model_;
  std::vector<std::string> contents_;  // by node index; files only
};

}  // namespace lazycache::hostile
