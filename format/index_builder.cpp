// SPDX-License-Identifier: MIT
#include "format/index_builder.h"

#include <zstd.h>

#include <algorithm>
#include <deque>

#include "format/hashing.h"
#include "format/le.h"
#include "format/quote.h"

namespace lazycache::format {

namespace {

class StringTable {
 public:
  // Returns the offset; fails when the table would pass u32 offsets.
  Result<uint32_t> add(std::string_view s) {
    if (bytes_.size() + s.size() > UINT32_MAX) return Status(ErrorCode::kInvalidArgument, "index string table over 4 GiB");
    auto off = static_cast<uint32_t>(bytes_.size());
    bytes_.append(s);
    return off;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

void put_digest(std::string& out, const Digest128& d) {
  put_le64(out, d.low);
  put_le64(out, d.high);
}

}  // namespace

Result<std::string> serialize_index(IndexModel& model) {
  auto& nodes = model.nodes;
  if (nodes.empty() || nodes.size() > UINT32_MAX - 1) return Status(ErrorCode::kInvalidArgument, "index: bad entry count");
  for (auto& n : nodes)
    std::sort(n.children.begin(), n.children.end(), [&](uint32_t a, uint32_t b) { return nodes[a].name < nodes[b].name; });
  // Breadth-first numbering: the children of each directory get consecutive ids.
  std::vector<uint32_t> order;  // id -> node
  std::vector<uint32_t> id_of(nodes.size(), UINT32_MAX);
  order.reserve(nodes.size());
  order.push_back(0);
  id_of[0] = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    for (uint32_t c : nodes[order[i]].children) {
      id_of[c] = static_cast<uint32_t>(order.size());
      order.push_back(c);
    }
  }
  if (order.size() != nodes.size()) return Status(ErrorCode::kInternal, "index: nodes not reachable from the top");

  StringTable strings;
  std::string xattr_records;
  uint32_t xattr_count = 0;
  std::string entries;
  entries.reserve(order.size() * kIndexEntryBytes);
  for (uint32_t id = 0; id < order.size(); ++id) {
    const IndexNode& n = nodes[order[id]];
    LC_ASSIGN_OR_RETURN(uint32_t name_off, strings.add(n.name));
    LC_ASSIGN_OR_RETURN(uint32_t target_off, strings.add(n.symlink_target));
    uint32_t xattr_first = xattr_count;
    for (const auto& x : n.xattrs) {
      // The reader refuses these (format/index.cpp): never write an index it would refuse.
      if (x.name.empty() || x.name.find('\0') != std::string::npos)
        return Status(ErrorCode::kInvalidArgument,
                      "xattr name " + quote_path(x.name, 64) + " of " + quote_path(n.name) + " is empty or holds a NUL byte");
      LC_ASSIGN_OR_RETURN(uint32_t xn, strings.add(x.name));
      LC_ASSIGN_OR_RETURN(uint32_t xv, strings.add(x.value));
      put_le32(xattr_records, xn);
      put_le32(xattr_records, static_cast<uint32_t>(x.name.size()));
      put_le32(xattr_records, xv);
      put_le32(xattr_records, static_cast<uint32_t>(x.value.size()));
      ++xattr_count;
    }
    uint32_t flags = (n.xattrs.empty() ? 0 : kEntryFlagXattrs) | (n.implicit_dir ? kEntryFlagImplicitDir : 0);
    put_le32(entries, id_of[n.parent]);
    entries.push_back(static_cast<char>(n.type));
    entries.push_back(static_cast<char>(flags));
    put_le16(entries, 0);
    put_le32(entries, n.mode & 07777);
    put_le32(entries, n.uid);
    put_le32(entries, n.gid);
    put_le32(entries, n.nlink);
    put_le64(entries, static_cast<uint64_t>(n.mtime_ns));
    put_le64(entries, n.size);
    put_le64(entries, n.data_offset);
    put_le32(entries, id_of[n.link_group]);
    put_le32(entries, name_off);
    put_le32(entries, static_cast<uint32_t>(n.name.size()));
    put_le32(entries, target_off);
    put_le32(entries, static_cast<uint32_t>(n.symlink_target.size()));
    put_le32(entries, n.children.empty() ? 0 : id_of[n.children.front()]);
    put_le32(entries, static_cast<uint32_t>(n.children.size()));
    put_le32(entries, xattr_first);
    put_le32(entries, static_cast<uint32_t>(n.xattrs.size()));
    put_le32(entries, 0);
    put_digest(entries, n.content_digest);
  }
  std::string frames;
  for (const auto& f : model.frames) {
    put_le64(frames, f.compressed_offset);
    put_le64(frames, f.uncompressed_offset);
    put_le32(frames, f.compressed_size);
    put_le32(frames, f.uncompressed_size);
    put_le32(frames, f.xxh64_low32);
    put_le32(frames, 0);
    put_digest(frames, f.digest);
  }
  std::string roots;
  for (const auto& r : model.roots) {
    LC_ASSIGN_OR_RETURN(uint32_t p, strings.add(r.original_path));
    LC_ASSIGN_OR_RETURN(uint32_t m, strings.add(r.member_prefix));
    put_le32(roots, id_of[r.node]);
    put_le32(roots, p);
    put_le32(roots, static_cast<uint32_t>(r.original_path.size()));
    put_le32(roots, m);
    put_le32(roots, static_cast<uint32_t>(r.member_prefix.size()));
    put_le32(roots, 0);
  }
  std::string hot;
  for (uint32_t h : model.hot_nodes) put_le32(hot, id_of[h]);
  // A model with no member offsets at all (archives forged by hand in tests) is written as
  // version 1, which has neither section.
  const bool v1 = model.dead.empty() &&
                  std::all_of(nodes.begin(), nodes.end(), [](const IndexNode& n) { return n.member_offset == kNoMemberOffset; });
  std::string member_offsets;
  member_offsets.reserve(order.size() * 8);
  for (uint32_t id = 0; id < order.size() && !v1; ++id) {
    const IndexNode& n = nodes[order[id]];
    const bool member = id != 0 && !n.implicit_dir;
    if (member != (n.member_offset != kNoMemberOffset))
      return Status(ErrorCode::kInternal, "index: node '" + n.name + "' has " + (member ? "no" : "a") + " member offset");
    put_le64(member_offsets, n.member_offset);
  }
  std::string dead;
  for (const auto& d : model.dead) {
    put_le64(dead, d.start);
    put_le64(dead, d.length);
    put_le32(dead, id_of[d.node]);
    put_le32(dead, 0);
  }
  LC_ASSIGN_OR_RETURN(uint32_t tool_off, strings.add(model.tool_version));

  std::string out;
  put_le32(out, kIndexMagic);
  put_le16(out, v1 ? 1 : kIndexVersion);
  put_le16(out, 0);
  put_le32(out, kIndexHeaderBytes);
  put_le32(out, kIndexEntryBytes);
  put_le32(out, static_cast<uint32_t>(order.size()));
  put_le32(out, static_cast<uint32_t>(model.frames.size()));
  put_le32(out, static_cast<uint32_t>(model.roots.size()));
  put_le32(out, static_cast<uint32_t>(model.hot_nodes.size()));
  put_le32(out, xattr_count);
  put_le32(out, static_cast<uint32_t>(model.tool_version.size()));
  put_le64(out, strings.bytes().size());
  const auto& t = model.totals;
  for (uint64_t v : {t.file_count, t.dir_count, t.symlink_count, t.uncompressed_bytes, t.file_bytes, t.compressed_bytes}) put_le64(out, v);
  put_le32(out, tool_off);
  if (!v1) put_le32(out, static_cast<uint32_t>(model.dead.size()));
  out.resize(kIndexHeaderBytes, '\0');
  out += entries;
  out += frames;
  out += roots;
  out += hot;
  out += xattr_records;
  out += member_offsets;
  out += dead;
  out += strings.bytes();
  put_le64(out, xxh3_64(std::as_bytes(std::span<const char>(out))));
  return out;
}

Result<std::string> build_index_frame(const std::string& raw_index, int level) {
  std::string compressed(ZSTD_compressBound(raw_index.size()), '\0');
  size_t n = ZSTD_compress(compressed.data(), compressed.size(), raw_index.data(), raw_index.size(), level);
  if (ZSTD_isError(n)) return Status(ErrorCode::kInternal, std::string("compressing the index: ") + ZSTD_getErrorName(n));
  compressed.resize(n);
  uint64_t payload = kIndexContainerHeaderBytes + compressed.size();
  if (payload > UINT32_MAX) return Status(ErrorCode::kInvalidArgument, "index frame over 4 GiB");
  std::string out;
  put_le32(out, kIndexFrameMagic);
  put_le32(out, static_cast<uint32_t>(payload));
  put_le32(out, kIndexContainerMagic);
  put_le32(out, kIndexCodecZstd);
  put_le64(out, raw_index.size());
  out += compressed;
  return out;
}

namespace {
constexpr uint64_t kMaxIndexExpansion = 1024;
}  // namespace

Result<ByteBuffer> unwrap_index_frame(std::span<const std::byte> frame) {
  auto corrupt = [](const std::string& what) { return Status(ErrorCode::kCorrupt, "index frame: " + what); };
  if (frame.size() < 8 + kIndexContainerHeaderBytes) return corrupt("too short");
  if (load_le32(frame.data()) != kIndexFrameMagic) return corrupt("skippable magic is not 0x184D2A5B (not a lazycache archive)");
  if (uint64_t{load_le32(frame.data() + 4)} + 8 != frame.size()) return corrupt("frame size field does not match its seek-table entry");
  if (load_le32(frame.data() + 8) != kIndexContainerMagic) return corrupt("container magic is not LCZI");
  if (load_le32(frame.data() + 12) != kIndexCodecZstd) return Status(ErrorCode::kUnsupported, "index frame: unknown codec");
  uint64_t raw_size = load_le64(frame.data() + 16);
  if (raw_size > kMaxIndexRawBytes) return corrupt("index of " + std::to_string(raw_size) + " bytes above the limit");
  auto body = frame.subspan(8 + kIndexContainerHeaderBytes);
  // A zstd frame cannot expand more than ~32768x (RLE blocks); real indexes compress ~5-30x.
  // Bounding the declared size by the bytes we hold keeps a tiny frame that promises a huge
  // index (a zip bomb) from allocating that much before decompression proves it false.
  if (raw_size > uint64_t{body.size()} * kMaxIndexExpansion + (1u << 20))
    return corrupt("index frame of " + std::to_string(body.size()) + " bytes declares " + std::to_string(raw_size) +
                   " bytes of index, more than zstd can expand to");
  unsigned long long content = ZSTD_getFrameContentSize(body.data(), body.size());
  if (content != raw_size) return corrupt("zstd frame content size does not match the recorded index size");
  ByteBuffer raw(raw_size);  // zstd writes every byte (checked below)
  size_t n = ZSTD_decompress(raw.data(), raw.size(), body.data(), body.size());
  if (ZSTD_isError(n)) return corrupt(std::string("decompressing: ") + ZSTD_getErrorName(n));
  if (n != raw_size) return corrupt("decompressed size mismatch");
  return raw;
}

}  // namespace lazycache::format
