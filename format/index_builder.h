// SPDX-License-Identifier: MIT
// File: format/index_builder.h -- the in-memory tree the writer fills, and its serialisation
// into the binary index (layout in docs/archive-format.md, "Index v1").
//
// The builder takes nodes in any order (node 0 is the synthetic top directory), renumbers them
// breadth-first so that each directory's children are contiguous and sorted bytewise by name,
// and writes fixed-size records plus one string table, checksummed with XXH3-64.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "format/archive.h"

namespace lazycache::format {

inline constexpr uint32_t kIndexMagic = 0x5849434C;  // "LCIX" as little-endian bytes
// Version 2 adds the member offsets and dead members sections (docs/archive-format.md); readers
// take versions 1 and 2, writers write 2.
inline constexpr uint16_t kIndexVersion = 2;
inline constexpr uint16_t kIndexOldestVersion = 1;
inline constexpr uint32_t kIndexHeaderBytes = 128;
inline constexpr uint32_t kIndexEntryBytes = 104;
inline constexpr uint32_t kIndexFrameBytes = 48;
inline constexpr uint32_t kIndexRootBytes = 24;
inline constexpr uint32_t kIndexXattrBytes = 16;
inline constexpr uint32_t kIndexDeadBytes = 24;
inline constexpr uint32_t kEntryFlagXattrs = 1;
inline constexpr uint32_t kEntryFlagImplicitDir = 2;

// The index frame: a skippable frame (nibble 0xB; 0xE is the seek table's) holding
//   u32 kIndexFrameMagic | u32 size | u32 container magic "LCZI" | u32 codec (1 = zstd)
//   | u64 raw index bytes | zstd frame of the raw index
inline constexpr uint32_t kIndexFrameMagic = 0x184D2A5B;
inline constexpr uint32_t kIndexContainerMagic = 0x495A434C;  // "LCZI"
inline constexpr uint32_t kIndexCodecZstd = 1;
inline constexpr uint32_t kIndexContainerHeaderBytes = 16;
// A parsed index is held in memory; refuse absurd sizes before allocating (a 10 M-file tree is
// about 1.5 GiB of records, far above any CI cache seen).
inline constexpr uint64_t kMaxIndexRawBytes = 2ull << 30;

struct IndexNode {
  std::string name;
  EntryType type = EntryType::kDirectory;
  uint32_t mode = 0755, uid = 0, gid = 0, nlink = 1;
  int64_t mtime_ns = 0;
  uint64_t size = 0, data_offset = 0;
  uint32_t link_group = 0;  // node index of the group's first node; its own index if none
  std::string symlink_target;
  Digest128 content_digest;
  std::vector<Xattr> xattrs;
  bool implicit_dir = false;
  uint32_t parent = 0;
  std::vector<uint32_t> children;  // node indices; the builder sorts them by name
  // Stream offset of the node's tar member (first header byte, pax header included); every
  // member node must have one, the top and implicit directories keep kNoMemberOffset.
  uint64_t member_offset = kNoMemberOffset;
};

// A superseded copy of a node's member earlier in the stream (Index::dead_members).
struct IndexDeadSpec {
  uint64_t start = 0, length = 0;
  uint32_t node = 0;
};

struct IndexRootSpec {
  std::string original_path, member_prefix;
  uint32_t node = 0;
};

struct IndexModel {
  std::vector<IndexNode> nodes;  // nodes[0] is the top directory
  std::vector<IndexRootSpec> roots;
  std::vector<FrameInfo> frames;
  std::vector<uint32_t> hot_nodes;
  std::vector<IndexDeadSpec> dead;  // sorted by start
  ArchiveTotals totals;
  std::string tool_version;
};

// Serialises the model into raw index bytes. Errors: kInvalidArgument (too big for u32 fields),
// kInternal (a member node without a member offset: a writer bug). A model where no node has a
// member offset (archives forged by hand in tests) is written as version 1.
Result<std::string> serialize_index(IndexModel& model);

// The bytes of the index frame (skippable header + container) for raw index bytes.
Result<std::string> build_index_frame(const std::string& raw_index, int level);
// Unwraps an index frame read from an archive: checks magic, sizes, decompresses with a bound.
// Errors: kCorrupt, kUnsupported (unknown codec).
Result<ByteBuffer> unwrap_index_frame(std::span<const std::byte> frame);

}  // namespace lazycache::format
