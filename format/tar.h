// SPDX-License-Identifier: MIT
// File: format/tar.h -- pax (POSIX.1-2001) tar headers: a deterministic writer and a reader
// for untrusted bytes.
//
// Writer: one ustar header per member ("ustar\0" "00", empty uname/gname), preceded by a pax
// 'x' header named "././@PaxHeader" only when a value does not fit ustar: path or link target
// over 100 bytes, size >= 8 GiB, uid/gid >= 2^21, an mtime with nanoseconds or outside ustar's
// range, or xattrs (SCHILY.xattr.NAME). Same member in, same bytes out.
// Reader: ustar, pax ('x', 'g'), GNU ('L', 'K', "ustar  " magic), base-256 numbers, signed or
// unsigned checksums. Every length is bounded before it is used; bad input gives kCorrupt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace lazycache::format {

inline constexpr size_t kTarBlock = 512;

enum class TarType : char {
  kRegular = '0',
  kHardlink = '1',
  kSymlink = '2',
  kDirectory = '5',
};

struct TarMember {
  std::string path;  // without a trailing '/'; the writer adds it for directories
  TarType type = TarType::kRegular;
  uint32_t mode = 0644;  // permission bits
  uint32_t uid = 0, gid = 0;
  int64_t mtime_ns = 0;
  uint64_t size = 0;     // regular files only
  std::string linkname;  // symlink target, or the earlier member a hardlink points to
  std::vector<std::pair<std::string, std::string>> xattrs;
};

// The header bytes of `m` (pax header if needed + ustar header), a multiple of 512 bytes.
std::string tar_header_bytes(const TarMember& m);
// Zero bytes that pad `data_size` bytes of member data to a block boundary.
inline uint64_t tar_padding(uint64_t data_size) { return (kTarBlock - data_size % kTarBlock) % kTarBlock; }
// The end-of-archive marker: two zero blocks.
inline std::string tar_end_blocks() { return std::string(2 * kTarBlock, '\0'); }

// One raw 512-byte header, decoded but not yet combined with pax/GNU extensions.
struct TarHeader {
  std::string name;  // prefix + "/" + name for POSIX ustar headers
  std::string linkname;
  uint32_t mode = 0;
  uint64_t uid = 0, gid = 0;
  uint64_t size = 0;
  int64_t mtime_s = 0;
  char typeflag = '0';
  bool zero_block = false;  // an all-zero block (end-of-archive marker)
};

// Decodes one header block. Errors: kCorrupt (bad checksum, bad number field).
Result<TarHeader> parse_tar_header(std::span<const std::byte> block);

// Parses pax extended-header records "LEN KEY=VALUE\n". Errors: kCorrupt.
Result<std::vector<std::pair<std::string, std::string>>> parse_pax_records(std::string_view data);

// Parses a pax time "SEC[.FRACTION]" (may be negative) into nanoseconds. Errors: kCorrupt
// (not a number, or beyond what int64 nanoseconds hold: years past 2262).
Result<int64_t> parse_pax_time(std::string_view value);

// A member as a reader sees it after applying pax and GNU extensions.
struct TarEntryInfo {
  std::string path;  // trailing '/' removed
  char typeflag = '0';
  uint32_t mode = 0;
  uint64_t uid = 0, gid = 0;
  int64_t mtime_ns = 0;
  uint64_t size = 0;         // data bytes that follow the header
  uint64_t data_offset = 0;  // stream offset of the first data byte
  std::string linkname;
  std::vector<std::pair<std::string, std::string>> xattrs;
};

// Pull reader over a tar stream. `read` fills its span fully or returns fewer bytes only at the
// end of the stream. Not thread-safe.
class TarReader {
 public:
  using ReadFn = std::function<Result<size_t>(std::span<std::byte>)>;
  explicit TarReader(ReadFn read) : read_(std::move(read)) {}

  // The next member (skipping unread data of the previous one), or nullopt at the
  // end-of-archive marker. Errors: kCorrupt (the message says at which stream offset).
  Result<std::optional<TarEntryInfo>> next();
  // Reads up to out.size() bytes of the current member's data; 0 at its end.
  Result<size_t> read_data(std::span<std::byte> out);
  uint64_t position() const { return position_; }

 private:
  Status read_exact(std::span<std::byte> out, const char* what);
  Status skip(uint64_t n);
  ReadFn read_;
  uint64_t position_ = 0;
  uint64_t data_left_ = 0, padding_left_ = 0;
};

}  // namespace lazycache::format
