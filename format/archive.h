// SPDX-License-Identifier: MIT
// File: format/archive.h -- the read side of a lazycache archive: Index and ArchiveReader.
//
// An archive is a pax tar stream cut into independent zstd frames, then a skippable frame
// holding the lazycache index, then the zstd seekable-format seek table (see
// docs/archive-format.md). This header is the contract fs/ and tools/ build on:
//  - Index: immutable after parse, every const method safe from any thread. Entries are laid
//    out so each directory's children are contiguous and sorted by name (bytewise), so lookups
//    are binary searches over the index bytes, O(log n), without building objects per entry.
//  - Frames are numbered 0..frame_count()-1 (data frames only; the index frame and the seek
//    table are not in this table). A file's bytes live in the uncompressed tar stream at
//    [entry.data_offset, entry.data_offset + entry.size) and span frames_for_range(...).
//  - Every number read from the archive is bounds-checked at parse time: a hostile archive gives
//    kCorrupt or kUnsupported, never a crash and never an out-of-range access later.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/byte_buffer.h"
#include "common/byte_source.h"
#include "common/status.h"

namespace lazycache::format {

using EntryId = uint32_t;

enum class EntryType : uint8_t { kRegular = 1, kDirectory = 2, kSymlink = 3 };

struct Digest128 {
  uint64_t low = 0, high = 0;  // XXH3-128
  bool operator==(const Digest128&) const = default;
  std::string hex() const;
};

// A borrowed view of one entry; string_views point into the Index and live as long as it does.
struct Entry {
  EntryId id = 0;
  EntryId parent = 0;  // the root's parent is itself
  EntryType type = EntryType::kRegular;
  uint32_t mode = 0;  // permission bits only (07777), no S_IFMT bits
  uint32_t uid = 0, gid = 0;
  int64_t mtime_ns = 0;      // nanoseconds since the epoch
  uint64_t size = 0;         // file size; symlink: target length; directory: 0
  uint64_t data_offset = 0;  // regular files: first data byte in the uncompressed tar stream
  uint32_t nlink = 1;        // hardlinked regular files share data and report nlink > 1
  EntryId link_group = 0;    // hardlinks: the id of the first entry of the group; else own id
  std::string_view name;     // last path component; the root's name is ""
  std::string_view symlink_target;
  Digest128 content_digest;  // XXH3-128 of the file content (regular files)
  bool has_xattrs = false;
  // An ancestor directory of a root ("root" for root "root/.npm"): metadata from stat at pack
  // time, but not a tar member, and extract never changes an existing one.
  bool implicit_dir = false;
};

struct Xattr {
  std::string name;
  std::string value;
};

struct FrameInfo {
  uint64_t compressed_offset = 0;  // in the archive object
  uint32_t compressed_size = 0;
  uint64_t uncompressed_offset = 0;  // in the tar stream
  uint32_t uncompressed_size = 0;
  uint32_t xxh64_low32 = 0;  // seek-table checksum of the uncompressed bytes
  Digest128 digest;          // XXH3-128 of the compressed frame bytes (strong; cache key)
};

// One saved path: `pack` and `save` take several; each becomes a top-level directory of the
// tar stream named by `member_prefix`, and mount/restore put it back at `original_path`.
struct Root {
  std::string original_path;  // as resolved at pack time, absolute
  std::string member_prefix;  // tar member prefix, e.g. "root/.npm" (no leading '/')
  EntryId entry = 0;          // the directory (or file) entry for this root
};

// Stream offset meaning "not a tar member" (the top entry, implicit directories).
inline constexpr uint64_t kNoMemberOffset = UINT64_MAX;

// A tar member that a later member of the same path supersedes ("tar --append" semantics:
// extracting the stream in order leaves the later one). Incremental saves write them instead
// of recompressing a frame around a changed file; mounts and extract never read them.
struct DeadMember {
  uint64_t start = 0;   // first header byte in the tar stream
  uint64_t length = 0;  // header(s) + data + padding, a multiple of 512
  EntryId entry = 0;    // the entry whose live member comes later in the stream
};

struct ArchiveTotals {
  uint64_t file_count = 0, dir_count = 0, symlink_count = 0;
  uint64_t uncompressed_bytes = 0;  // tar stream length
  uint64_t file_bytes = 0;          // sum of regular file sizes
  uint64_t compressed_bytes = 0;    // data frames only
};

class Index {
 public:
  // Parses and validates serialized index bytes (the content of the index frame) against the
  // seek table's data frames. Errors: kCorrupt, kUnsupported (newer version).
  static Result<std::shared_ptr<const Index>> parse(ByteBuffer bytes);
  // The same from a copy of `bytes`.
  static Result<std::shared_ptr<const Index>> parse(std::string_view bytes);

  virtual ~Index() = default;
  virtual EntryId root() const = 0;  // the top directory: its children are the roots' top dirs
  virtual uint32_t entry_count() const = 0;
  virtual Entry entry(EntryId id) const = 0;  // precondition: id < entry_count()
  virtual std::optional<EntryId> lookup(EntryId dir, std::string_view name) const = 0;
  // "a/b/c" relative to root(); "" is root().
  virtual std::optional<EntryId> lookup_path(std::string_view path) const = 0;
  // Children of a directory, sorted by name: ids [first, first + count).
  struct ChildRange {
    EntryId first = 0;
    uint32_t count = 0;
  };
  virtual ChildRange children(EntryId dir) const = 0;
  virtual std::vector<Xattr> xattrs(EntryId id) const = 0;
  virtual std::string path(EntryId id) const = 0;  // "a/b/c", "" for root()
  virtual const std::vector<Root>& roots() const = 0;
  virtual std::span<const FrameInfo> frames() const = 0;
  // Frames [first, last] covering uncompressed [offset, offset+length); length > 0.
  virtual std::pair<uint32_t, uint32_t> frames_for_range(uint64_t uncompressed_offset, uint64_t length) const = 0;
  // Files in the order the last job first read them (learned prefetch); may be empty.
  virtual std::span<const EntryId> hot_list() const = 0;
  virtual const ArchiveTotals& totals() const = 0;
  virtual std::string_view tool_version() const = 0;
  // Where entry `id`'s tar member starts in the stream (first header byte): index version 2;
  // nullopt for version 1 indexes, and kNoMemberOffset for the top and implicit directories.
  virtual std::optional<uint64_t> member_offset(EntryId id) const = 0;
  // Superseded members, sorted by start, disjoint (index version 2; empty for version 1).
  virtual std::span<const DeadMember> dead_members() const = 0;
};

// Opens an archive through any ByteSource. open() reads the tail (seek table + index) with at
// most two range reads for archives of any usual size, and validates both.
// Thread-safe after open: all methods may be called concurrently.
class ArchiveReader {
 public:
  // Errors: kCorrupt (not a lazycache archive, bad checksums), kUnsupported, and the source's.
  // `first_read_bytes`: the size of the first read, from the end (default 256 KiB); a caller
  // that knows the index is larger asks for more and saves the second read's round trip.
  static Result<std::unique_ptr<ArchiveReader>> open(std::shared_ptr<const ByteSource> source, uint64_t first_read_bytes = 0);

  virtual ~ArchiveReader() = default;
  virtual const Index& index() const = 0;
  virtual std::shared_ptr<const Index> shared_index() const = 0;
  virtual const ByteSource& source() const = 0;

  // Verifies compressed frame bytes (XXH3-128 digest), decompresses them, verifies size and
  // the seek-table checksum. Pure: does no I/O. Errors: kCorrupt.
  virtual Result<std::string> decode_frame(uint32_t frame, std::span<const std::byte> compressed) const = 0;
  // decode_frame() into a caller's buffer of exactly the frame's uncompressed size (its contents on
  // entry are ignored; garbage after an error), so a caller can recycle buffers. Pure, thread-safe.
  virtual Status decode_frame_into(uint32_t frame, std::span<const std::byte> compressed, std::span<std::byte> out) const = 0;
  // Reads frame `frame` from the source and decodes it.
  virtual Result<std::string> read_frame(uint32_t frame) const = 0;
  // Reads file content [offset, offset+out.size()) of a regular entry; short only at EOF.
  // Uncached: fs/ has its own caches; this serves cat, extract and verify.
  virtual Result<size_t> read_file(EntryId id, uint64_t offset, std::span<std::byte> out) const = 0;
};

}  // namespace lazycache::format
