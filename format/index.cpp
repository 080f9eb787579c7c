// SPDX-License-Identifier: MIT
// Index::parse and the Index implementation that reads records straight from the index bytes.
#include <algorithm>
#include <cstring>

#include "format/archive.h"
#include "format/hashing.h"
#include "format/index_builder.h"
#include "format/le.h"
#include "format/quote.h"
#include "format/seek_table.h"

namespace lazycache::format {

namespace {

Status corrupt(const std::string& what) { return Status(ErrorCode::kCorrupt, "index: " + what); }

// Name rules shared with extraction safety: a name is one path component.
// Why a root's original path is not the form pack writes ("/" + components joined by '/': never
// "/" itself, no empty, "." or ".." segment, no trailing '/', no NUL), or nullptr when it is.
// Restore and mount put a root back at this path, so anything else would let a poisoned store
// choose where they write ("/", "/cache/../../etc", "/a//b" that compares unequal to "/a/b").
const char* root_path_problem(std::string_view path) {
  if (path.empty() || path[0] != '/') return "is not absolute";
  if (path == "/") return "is '/' (pack never saves the root directory itself)";
  if (path.find('\0') != std::string_view::npos) return "holds a NUL byte";
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view seg = path.substr(start, end - start);
    if (seg.empty()) return "has an empty segment ('//' or a trailing '/')";
    if (seg == "." || seg == "..") return "has a '.' or '..' segment";
    start = end + 1;
  }
  return nullptr;
}

// True when `inner` is `outer` or lies below it (both normalised root paths).
bool path_within(std::string_view inner, std::string_view outer) {
  return inner == outer || (inner.size() > outer.size() && inner.substr(0, outer.size()) == outer && inner[outer.size()] == '/');
}

// An xattr name as listxattr(2) can report it: non-empty, no NUL (a NUL inside would make the
// kernel's NUL-separated list show one extra name).
bool valid_xattr_name(std::string_view n) { return !n.empty() && n.find('\0') == std::string_view::npos; }

bool valid_name(std::string_view n) {
  return !n.empty() && n.size() <= 255 && n != "." && n != ".." && n.find('/') == std::string_view::npos &&
         n.find('\0') == std::string_view::npos;
}

class IndexImpl final : public Index {
 public:
  explicit IndexImpl(ByteBuffer bytes) : bytes_(std::move(bytes)) {}

  Status validate();

  EntryId root() const override { return 0; }
  uint32_t entry_count() const override { return entry_count_; }
  Entry entry(EntryId id) const override;
  std::optional<EntryId> lookup(EntryId dir, std::string_view name) const override;
  std::optional<EntryId> lookup_path(std::string_view path) const override;
  ChildRange children(EntryId dir) const override {
    const std::byte* r = record(dir);
    if (std::to_integer<uint8_t>(r[4]) != static_cast<uint8_t>(EntryType::kDirectory)) return {};
    return {load_le32(r + 68), load_le32(r + 72)};
  }
  std::vector<Xattr> xattrs(EntryId id) const override;
  std::string path(EntryId id) const override;
  const std::vector<Root>& roots() const override { return roots_; }
  std::span<const FrameInfo> frames() const override { return frames_; }
  std::pair<uint32_t, uint32_t> frames_for_range(uint64_t uncompressed_offset, uint64_t length) const override;
  std::span<const EntryId> hot_list() const override { return hot_; }
  const ArchiveTotals& totals() const override { return totals_; }
  std::string_view tool_version() const override { return tool_version_; }
  std::optional<uint64_t> member_offset(EntryId id) const override {
    if (member_offsets_offset_ == 0) return std::nullopt;
    return load_le64(base() + member_offsets_offset_ + uint64_t{id} * 8);
  }
  std::span<const DeadMember> dead_members() const override { return dead_; }

 private:
  Status validate_members(uint64_t stream_bytes, uint64_t dead_offset, uint32_t dead_count);
  const std::byte* base() const { return reinterpret_cast<const std::byte*>(bytes_.data()); }
  const std::byte* record(EntryId id) const { return base() + kIndexHeaderBytes + uint64_t{id} * kIndexEntryBytes; }
  std::string_view str(uint32_t off, uint32_t len) const { return bytes_.view().substr(strings_offset_ + off, len); }
  bool str_ok(uint32_t off, uint32_t len) const { return uint64_t{off} + len <= strings_bytes_; }
  std::string_view name_of(EntryId id) const { return str(load_le32(record(id) + 52), load_le32(record(id) + 56)); }
  // "entry 'data/a/b' (#12)" for messages while parsing: walks parents only while they precede
  // (a loop or a forward parent shows as ".../name"); names must already be in the string table.
  std::string describe_entry(EntryId id) const;

  ByteBuffer bytes_;
  uint32_t entry_count_ = 0;
  uint64_t strings_offset_ = 0, strings_bytes_ = 0, xattrs_offset_ = 0;
  uint32_t xattr_count_ = 0;
  std::vector<Root> roots_;
  std::vector<FrameInfo> frames_;
  std::vector<EntryId> hot_;
  std::vector<DeadMember> dead_;
  uint64_t member_offsets_offset_ = 0;  // 0: a version 1 index (no member offsets)
  ArchiveTotals totals_;
  std::string_view tool_version_;
};

Status IndexImpl::validate() {
  const uint64_t total = bytes_.size();
  if (total < kIndexHeaderBytes + 8) return corrupt("shorter than its header");
  const std::byte* b = base();
  if (load_le32(b) != kIndexMagic) return corrupt("bad magic (not a lazycache index)");
  uint16_t version = load_le16(b + 4);
  if (version < kIndexOldestVersion || version > kIndexVersion)
    return Status(ErrorCode::kUnsupported, "index: version " + std::to_string(version) + " (this lazycache reads versions " +
                                               std::to_string(kIndexOldestVersion) + " to " + std::to_string(kIndexVersion) + ")");
  if (load_le16(b + 6) != 0) return Status(ErrorCode::kUnsupported, "index: unknown flags set");
  if (xxh3_64(std::span<const std::byte>(b, total - 8)) != load_le64(b + total - 8)) return corrupt("checksum mismatch");
  if (load_le32(b + 8) != kIndexHeaderBytes || load_le32(b + 12) != kIndexEntryBytes) return corrupt("unexpected header or record size");
  entry_count_ = load_le32(b + 16);
  uint32_t frame_count = load_le32(b + 20), root_count = load_le32(b + 24), hot_count = load_le32(b + 28);
  xattr_count_ = load_le32(b + 32);
  uint32_t tool_len = load_le32(b + 36);
  strings_bytes_ = load_le64(b + 40);
  totals_ = ArchiveTotals{load_le64(b + 48), load_le64(b + 56), load_le64(b + 64), load_le64(b + 72), load_le64(b + 80), load_le64(b + 88)};
  uint32_t tool_off = load_le32(b + 96);
  const uint32_t dead_count = version >= 2 ? load_le32(b + 100) : 0;
  // All sizes in u64: counts are u32 and record sizes small, so no product overflows.
  uint64_t entries_off = kIndexHeaderBytes;
  uint64_t frames_off = entries_off + uint64_t{entry_count_} * kIndexEntryBytes;
  uint64_t roots_off = frames_off + uint64_t{frame_count} * kIndexFrameBytes;
  uint64_t hot_off = roots_off + uint64_t{root_count} * kIndexRootBytes;
  xattrs_offset_ = hot_off + uint64_t{hot_count} * 4;
  const uint64_t offsets_off = xattrs_offset_ + uint64_t{xattr_count_} * kIndexXattrBytes;
  const uint64_t dead_off = offsets_off + (version >= 2 ? uint64_t{entry_count_} * 8 : 0);
  strings_offset_ = dead_off + uint64_t{dead_count} * kIndexDeadBytes;
  if (strings_bytes_ > total || strings_offset_ + strings_bytes_ + 8 != total)
    return corrupt("section sizes do not add up to the index size");
  if (entry_count_ == 0) return corrupt("no entries");
  if (!str_ok(tool_off, tool_len)) return corrupt("tool version outside the string table");
  tool_version_ = str(tool_off, tool_len);

  // Frames: contiguous in both the object and the tar stream.
  frames_.reserve(frame_count);
  uint64_t c_next = 0, u_next = 0;
  for (uint32_t i = 0; i < frame_count; ++i) {
    const std::byte* f = b + frames_off + uint64_t{i} * kIndexFrameBytes;
    FrameInfo fi;
    fi.compressed_offset = load_le64(f);
    fi.uncompressed_offset = load_le64(f + 8);
    fi.compressed_size = load_le32(f + 16);
    fi.uncompressed_size = load_le32(f + 20);
    fi.xxh64_low32 = load_le32(f + 24);
    fi.digest = Digest128{load_le64(f + 32), load_le64(f + 40)};
    if (fi.compressed_offset != c_next || fi.uncompressed_offset != u_next)
      return corrupt("frame " + std::to_string(i) + " is not contiguous with the previous one");
    if (fi.compressed_size == 0 || fi.uncompressed_size == 0 || fi.uncompressed_size > kMaxFrameUncompressedBytes)
      return corrupt("frame " + std::to_string(i) + " has a bad size");
    c_next += fi.compressed_size;
    u_next += fi.uncompressed_size;
    frames_.push_back(fi);
  }
  const uint64_t stream_bytes = u_next;

  // Strings first, so the checks below may compare any entry's name.
  for (EntryId id = 0; id < entry_count_; ++id) {
    const std::byte* r = record(id);
    if (!str_ok(load_le32(r + 52), load_le32(r + 56)) || !str_ok(load_le32(r + 60), load_le32(r + 64)))
      return corrupt("entry #" + std::to_string(id) + ": name or target outside the string table");
  }
  // Entries: breadth-first, parent < id, children ranges contiguous, disjoint and sorted.
  uint64_t children_total = 0;
  for (EntryId id = 0; id < entry_count_; ++id) {
    const std::byte* r = record(id);
    auto where = [&](const std::string& what) { return corrupt(describe_entry(id) + ": " + what); };
    uint32_t parent = load_le32(r);
    uint8_t type = std::to_integer<uint8_t>(r[4]), flags = std::to_integer<uint8_t>(r[5]);
    if (type < 1 || type > 3) return where("unknown type " + std::to_string(type));
    if ((flags & ~(kEntryFlagXattrs | kEntryFlagImplicitDir)) != 0 || load_le16(r + 6) != 0 || load_le32(r + 84) != 0)
      return where("reserved bits set");
    if (load_le32(r + 8) > 07777) return where("mode has more than permission bits");
    std::string_view name = name_of(id);
    uint32_t target_len = load_le32(r + 64);
    if (id == 0) {
      if (parent != 0 || type != static_cast<uint8_t>(EntryType::kDirectory) || !name.empty())
        return where("the top entry must be an unnamed directory");
    } else {
      if (parent >= id) return where("parent does not precede the entry");
      if (!valid_name(name)) return where("invalid name");
    }
    uint64_t size = load_le64(r + 32), data_offset = load_le64(r + 40);
    uint32_t link_group = load_le32(r + 48), first_child = load_le32(r + 68), child_count = load_le32(r + 72);
    uint32_t xattr_first = load_le32(r + 76), xattr_n = load_le32(r + 80);
    if (load_le32(r + 20) == 0) return where("nlink is 0");
    if (uint64_t{xattr_first} + xattr_n > xattr_count_ || ((flags & kEntryFlagXattrs) != 0) != (xattr_n != 0))
      return where("bad xattr range");
    if (link_group >= entry_count_) return where("link group out of range");
    if ((flags & kEntryFlagImplicitDir) && type != static_cast<uint8_t>(EntryType::kDirectory)) return where("implicit non-directory");
    if (type == static_cast<uint8_t>(EntryType::kDirectory)) {
      if (size != 0 || target_len != 0 || link_group != id) return where("directory with size, target or link group");
      if (child_count > 0) {
        if (first_child <= id || uint64_t{first_child} + child_count > entry_count_) return where("children out of range");
        for (uint32_t c = first_child; c < first_child + child_count; ++c) {
          if (load_le32(record(c)) != id) return where("child " + describe_entry(c) + " has another parent");
          if (c > first_child && !(name_of(c - 1) < name_of(c)))
            return where("children not strictly sorted by name (duplicate or out of order at " + describe_entry(c) + ")");
        }
      }
      children_total += child_count;
    } else {
      if (child_count != 0) return where("non-directory with children");
      if (type == static_cast<uint8_t>(EntryType::kSymlink)) {
        if (target_len == 0 || size != target_len || link_group != id) return where("bad symlink");
      } else {
        if (target_len != 0) return where("regular file with a link target");
        if (size > stream_bytes || data_offset > stream_bytes - size) return where("data outside the tar stream");
        const std::byte* g = record(link_group);
        if (std::to_integer<uint8_t>(g[4]) != static_cast<uint8_t>(EntryType::kRegular) || load_le32(g + 48) != link_group ||
            load_le64(g + 32) != size || load_le64(g + 40) != data_offset)
          return where("hardlink group leader does not match");
      }
    }
    if (parent != id && std::to_integer<uint8_t>(record(parent)[4]) != static_cast<uint8_t>(EntryType::kDirectory))
      return where("parent is not a directory");
  }
  // Every non-top entry lies in exactly one parent's child range (each range only holds entries
  // naming that parent, so ranges are disjoint; equal totals mean all are covered).
  if (children_total != entry_count_ - 1) return corrupt("child ranges do not cover every entry exactly once");

  for (uint32_t i = 0; i < xattr_count_; ++i) {
    const std::byte* x = b + xattrs_offset_ + uint64_t{i} * kIndexXattrBytes;
    if (!str_ok(load_le32(x), load_le32(x + 4)) || !str_ok(load_le32(x + 8), load_le32(x + 12)) || load_le32(x + 4) == 0)
      return corrupt("xattr " + std::to_string(i) + " outside the string table");
    if (!valid_xattr_name(str(load_le32(x), load_le32(x + 4))))
      return corrupt("xattr " + std::to_string(i) + " name " + quote_path(std::string(str(load_le32(x), load_le32(x + 4)))) +
                     " holds a NUL byte");
  }
  for (uint32_t i = 0; i < root_count; ++i) {
    const std::byte* r = b + roots_off + uint64_t{i} * kIndexRootBytes;
    Root root;
    root.entry = load_le32(r);
    if (root.entry >= entry_count_ || root.entry == 0 || !str_ok(load_le32(r + 4), load_le32(r + 8)) ||
        !str_ok(load_le32(r + 12), load_le32(r + 16)))
      return corrupt("root " + std::to_string(i) + " out of range");
    root.original_path = std::string(str(load_le32(r + 4), load_le32(r + 8)));
    root.member_prefix = std::string(str(load_le32(r + 12), load_le32(r + 16)));
    if (const char* why = root_path_problem(root.original_path))
      return corrupt("root " + std::to_string(i) + " original path " + quote_path(root.original_path) + " " + why);
    // Pack saves "/base/a/b" as member prefix "a/b", the path of the root's entry.
    const std::string entry_path = path(root.entry);
    if (root.member_prefix != entry_path || root.original_path.size() < entry_path.size() + 1 ||
        root.original_path.compare(root.original_path.size() - entry_path.size(), entry_path.size(), entry_path) != 0 ||
        root.original_path[root.original_path.size() - entry_path.size() - 1] != '/')
      return corrupt("root " + std::to_string(i) + " original path " + quote_path(root.original_path) + " and member prefix " +
                     quote_path(root.member_prefix) + " do not end in the root entry's path " + quote_path(entry_path));
    for (const auto& other : roots_)
      if (path_within(root.original_path, other.original_path) || path_within(other.original_path, root.original_path))
        return corrupt("root " + std::to_string(i) + " original path " + quote_path(root.original_path) + " overlaps root path " +
                       quote_path(other.original_path) + " (pack refuses nested paths)");
    roots_.push_back(std::move(root));
  }
  for (uint32_t i = 0; i < hot_count; ++i) {
    EntryId h = load_le32(b + hot_off + uint64_t{i} * 4);
    if (h >= entry_count_ || std::to_integer<uint8_t>(record(h)[4]) != static_cast<uint8_t>(EntryType::kRegular))
      return corrupt("hot list entry " + std::to_string(i) + " is not a regular file");
    hot_.push_back(h);
  }
  if (version >= 2) {
    member_offsets_offset_ = offsets_off;
    LC_RETURN_IF_ERROR(validate_members(stream_bytes, dead_off, dead_count));
  }
  return Status();
}

// Member offsets and dead members: every offset on a block boundary inside the stream, no two
// members starting at the same offset, no member starting inside a dead member or inside a
// file's data, and each dead member before its entry's live member. (Whether each member's
// header really sits there is verify_archive's job: it needs the frames.)
Status IndexImpl::validate_members(uint64_t stream_bytes, uint64_t dead_off, uint32_t dead_count) {
  struct Start {
    uint64_t offset, end;  // end: no other member may start before it
    bool operator<(const Start& o) const { return offset < o.offset; }
  };
  std::vector<Start> starts;
  starts.reserve(entry_count_ + dead_count);
  for (EntryId id = 0; id < entry_count_; ++id) {
    const std::byte* r = record(id);
    const uint64_t off = *member_offset(id);
    const bool member = id != 0 && !(std::to_integer<uint8_t>(r[5]) & kEntryFlagImplicitDir);
    if (!member) {
      if (off != kNoMemberOffset) return corrupt(describe_entry(id) + ": has a member offset but is not a tar member");
      continue;
    }
    if (off % 512 != 0 || off >= stream_bytes) return corrupt(describe_entry(id) + ": bad member offset " + std::to_string(off));
    uint64_t end = off + 512;
    const bool leader = std::to_integer<uint8_t>(r[4]) == static_cast<uint8_t>(EntryType::kRegular) && load_le32(r + 48) == id;
    if (leader) {
      const uint64_t data = load_le64(r + 40), size = load_le64(r + 32);
      if (data < end) return corrupt(describe_entry(id) + ": data starts before the end of its member header");
      end = data + size;  // in the stream: checked with the entries
    }
    starts.push_back(Start{off, end});
  }
  uint64_t prev_end = 0;
  for (uint32_t i = 0; i < dead_count; ++i) {
    const std::byte* d = base() + dead_off + uint64_t{i} * kIndexDeadBytes;
    DeadMember m{load_le64(d), load_le64(d + 8), load_le32(d + 16)};
    const std::string what = "dead member " + std::to_string(i);
    if (load_le32(d + 20) != 0) return corrupt(what + ": reserved bits set");
    if (m.start % 512 != 0 || m.length % 512 != 0 || m.length == 0 || m.start > stream_bytes || m.length > stream_bytes - m.start)
      return corrupt(what + ": bad range");
    if (m.start < prev_end) return corrupt(what + ": not sorted or overlaps the previous one");
    if (m.entry == 0 || m.entry >= entry_count_) return corrupt(what + ": entry out of range");
    const uint64_t live = *member_offset(m.entry);
    if (live == kNoMemberOffset || m.start + m.length > live)
      return corrupt(what + " of " + describe_entry(m.entry) + ": does not come before the entry's live member");
    prev_end = m.start + m.length;
    starts.push_back(Start{m.start, prev_end});
    dead_.push_back(m);
  }
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i)
    if (starts[i].offset < starts[i - 1].end)
      return corrupt("a member starts at stream offset " + std::to_string(starts[i].offset) + ", inside the member at " +
                     std::to_string(starts[i - 1].offset));
  return Status();
}

std::string IndexImpl::describe_entry(EntryId id) const {
  std::vector<std::string_view> names;
  std::string path;
  EntryId cur = id;
  // Bounded by the depth (each step goes to a smaller id) and by the message size.
  while (cur != 0 && names.size() < 4096) {
    names.push_back(name_of(cur));
    const EntryId parent = load_le32(record(cur));
    if (parent >= cur) break;
    cur = parent;
  }
  if (cur != 0) path = ".../";
  for (size_t i = names.size(); i-- > 0;) path += std::string(names[i]) + (i ? "/" : "");
  return "entry " + quote_path(path) + " (#" + std::to_string(id) + ")";
}

Entry IndexImpl::entry(EntryId id) const {
  const std::byte* r = record(id);
  Entry e;
  e.id = id;
  e.parent = load_le32(r);
  e.type = static_cast<EntryType>(std::to_integer<uint8_t>(r[4]));
  uint8_t flags = std::to_integer<uint8_t>(r[5]);
  e.has_xattrs = flags & kEntryFlagXattrs;
  e.implicit_dir = flags & kEntryFlagImplicitDir;
  e.mode = load_le32(r + 8);
  e.uid = load_le32(r + 12);
  e.gid = load_le32(r + 16);
  e.nlink = load_le32(r + 20);
  e.mtime_ns = static_cast<int64_t>(load_le64(r + 24));
  e.size = load_le64(r + 32);
  e.data_offset = load_le64(r + 40);
  e.link_group = load_le32(r + 48);
  e.name = str(load_le32(r + 52), load_le32(r + 56));
  e.symlink_target = str(load_le32(r + 60), load_le32(r + 64));
  e.content_digest = Digest128{load_le64(r + 88), load_le64(r + 96)};
  return e;
}

std::optional<EntryId> IndexImpl::lookup(EntryId dir, std::string_view name) const {
  ChildRange range = children(dir);
  uint32_t lo = range.first, hi = range.first + range.count;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    std::string_view m = name_of(mid);
    if (m == name) return mid;
    if (m < name) lo = mid + 1;
    else hi = mid;
  }
  return std::nullopt;
}

std::optional<EntryId> IndexImpl::lookup_path(std::string_view path) const {
  EntryId cur = 0;
  while (!path.empty()) {
    size_t slash = path.find('/');
    std::string_view part = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    auto next = lookup(cur, part);
    if (!next) return std::nullopt;
    cur = *next;
  }
  return cur;
}

std::vector<Xattr> IndexImpl::xattrs(EntryId id) const {
  const std::byte* r = record(id);
  std::vector<Xattr> out;
  uint32_t first = load_le32(r + 76), n = load_le32(r + 80);
  for (uint32_t i = first; i < first + n; ++i) {
    const std::byte* x = base() + xattrs_offset_ + uint64_t{i} * kIndexXattrBytes;
    out.push_back(Xattr{std::string(str(load_le32(x), load_le32(x + 4))), std::string(str(load_le32(x + 8), load_le32(x + 12)))});
  }
  return out;
}

std::string IndexImpl::path(EntryId id) const {
  std::vector<std::string_view> parts;
  while (id != 0) {
    parts.push_back(name_of(id));
    id = load_le32(record(id));
  }
  std::string out;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (!out.empty()) out += '/';
    out += *it;
  }
  return out;
}

std::pair<uint32_t, uint32_t> IndexImpl::frames_for_range(uint64_t uncompressed_offset, uint64_t length) const {
  auto frame_at = [&](uint64_t off) {
    auto it = std::upper_bound(frames_.begin(), frames_.end(), off,
                               [](uint64_t o, const FrameInfo& f) { return o < f.uncompressed_offset; });
    return static_cast<uint32_t>(it == frames_.begin() ? 0 : (it - frames_.begin()) - 1);
  };
  if (frames_.empty()) return {0, 0};
  uint64_t last = length == 0 ? uncompressed_offset : uncompressed_offset + length - 1;
  return {frame_at(uncompressed_offset), frame_at(last)};
}

}  // namespace

Result<std::shared_ptr<const Index>> Index::parse(std::string_view bytes) {
  ByteBuffer copy(bytes.size());
  if (!bytes.empty()) std::memcpy(copy.data(), bytes.data(), bytes.size());
  return parse(std::move(copy));
}

Result<std::shared_ptr<const Index>> Index::parse(ByteBuffer bytes) {
  auto index = std::make_shared<IndexImpl>(std::move(bytes));
  LC_RETURN_IF_ERROR(index->validate());
  return std::shared_ptr<const Index>(std::move(index));
}

}  // namespace lazycache::format
