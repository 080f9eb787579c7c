// SPDX-License-Identifier: MIT
#include "format/verify.h"

#include <algorithm>
#include <cstring>

#include "format/hashing.h"
#include "format/quote.h"
#include "format/tar.h"

namespace lazycache::format {

namespace {

// Serves the tar stream frame after frame, decoding each exactly once.
class FrameStream {
 public:
  FrameStream(const ArchiveReader& r, const std::function<void(uint32_t)>& progress) : r_(r), progress_(progress) {}
  Result<size_t> read(std::span<std::byte> out) {
    size_t done = 0;
    while (done < out.size()) {
      if (pos_ == cur_.size()) {
        if (next_ >= r_.index().frames().size()) break;
        LC_ASSIGN_OR_RETURN(cur_, r_.read_frame(next_));
        ++next_;
        pos_ = 0;
        if (progress_) progress_(next_);
      }
      size_t n = std::min(out.size() - done, cur_.size() - pos_);
      std::memcpy(out.data() + done, cur_.data() + pos_, n);
      pos_ += n;
      done += n;
    }
    return done;
  }
  uint32_t frames_read() const { return next_; }

 private:
  const ArchiveReader& r_;
  const std::function<void(uint32_t)>& progress_;
  std::string cur_;
  size_t pos_ = 0;
  uint32_t next_ = 0;
};

char expected_typeflag(const Entry& e) {
  switch (e.type) {
    case EntryType::kDirectory: return '5';
    case EntryType::kSymlink: return '2';
    case EntryType::kRegular: return e.link_group == e.id ? '0' : '?';  // '?': '0' or '1'
  }
  return 0;
}

}  // namespace

Result<VerifyStats> verify_archive(const ArchiveReader& reader, const std::function<void(uint32_t)>& progress) {
  const Index& idx = reader.index();
  FrameStream stream(reader, progress);
  TarReader tar([&](std::span<std::byte> out) { return stream.read(out); });
  std::vector<bool> seen(idx.entry_count(), false);
  std::vector<bool> data_seen(idx.entry_count(), false);  // per link group leader
  VerifyStats stats;
  std::string buf(1 << 20, '\0');
  const auto dead = idx.dead_members();
  size_t next_dead = 0;
  uint64_t member_start = 0;  // members are contiguous: each starts where the previous ended
  for (;;) {
    LC_ASSIGN_OR_RETURN(auto member, tar.next());
    if (!member) break;
    ++stats.members;
    const uint64_t start = member_start;
    member_start = member->data_offset + member->size + tar_padding(member->size);
    auto bad = [&](const std::string& what) { return Status(ErrorCode::kCorrupt, "member " + quote_path(member->path) + ": " + what); };
    auto id = idx.lookup_path(member->path);
    if (!id || *id == idx.root()) return bad("not in the index");
    if (next_dead < dead.size() && dead[next_dead].start == start) {
      // A superseded copy: its path must be the dead record's entry, its extent the record's,
      // and the live member must still be ahead. Its content is never served, so not hashed.
      const DeadMember& d = dead[next_dead++];
      if (d.entry != *id) return bad("the index's dead member at offset " + std::to_string(start) + " names another entry");
      if (member_start != d.start + d.length) return bad("dead member length differs from the index");
      if (seen[*id]) return bad("dead member after its live member");
      const char live_type = expected_typeflag(idx.entry(*id));
      if (member->typeflag != (live_type == '?' ? '0' : live_type)) return bad("dead member of another type than its live member");
      continue;
    }
    if (seen[*id]) return bad("appears twice");
    seen[*id] = true;
    Entry e = idx.entry(*id);
    if (auto off = idx.member_offset(*id); off && *off != start)
      return bad("starts at stream offset " + std::to_string(start) + ", the index says " + std::to_string(*off));
    if (e.implicit_dir) return bad("index marks it as an implicit directory");
    char want = expected_typeflag(e);
    char got = member->typeflag;
    if (!(want == got || (want == '?' && (got == '0' || got == '1'))))
      return bad(std::string("tar type '") + got + "' does not match the index");
    if (member->mode != e.mode || member->uid != e.uid || member->gid != e.gid || member->mtime_ns != e.mtime_ns)
      return bad("mode, owner or mtime differs from the index");
    if (e.type == EntryType::kSymlink && member->linkname != e.symlink_target) return bad("symlink target differs from the index");
    if (got == '1') {
      auto target = idx.lookup_path(member->linkname);
      if (!target || idx.entry(*target).link_group != e.link_group)
        return bad("hardlink target " + quote_path(member->linkname) + " is not in its link group");
    }
    if (got == '0') {
      if (member->size != e.size || member->data_offset != e.data_offset) return bad("size or data offset differs from the index");
      if (data_seen[e.link_group]) return bad("link group data stored twice");
      data_seen[e.link_group] = true;
      Xxh3Stream hash;
      for (;;) {
        LC_ASSIGN_OR_RETURN(size_t n, tar.read_data(std::as_writable_bytes(std::span<char>(buf))));
        if (n == 0) break;
        hash.update(std::as_bytes(std::span<const char>(buf.data(), n)));
      }
      if (hash.digest() != e.content_digest) return bad("content does not match its XXH3-128 digest");
    }
  }
  for (EntryId id = 1; id < idx.entry_count(); ++id) {
    Entry e = idx.entry(id);
    if (!seen[id] && !e.implicit_dir) return Status(ErrorCode::kCorrupt, "entry " + quote_path(idx.path(id)) + " has no tar member");
    if (e.type == EntryType::kRegular && !data_seen[e.link_group])
      return Status(ErrorCode::kCorrupt, "entry " + quote_path(idx.path(id)) + " has no data in the tar stream");
  }
  if (next_dead != dead.size())
    return Status(ErrorCode::kCorrupt,
                  "dead member at stream offset " + std::to_string(dead[next_dead].start) + " is not a member boundary");
  // Read the rest (padding after the end marker) so every frame is checked.
  std::byte sink[4096];
  for (;;) {
    LC_ASSIGN_OR_RETURN(size_t n, stream.read(sink));
    if (n == 0) break;
  }
  stats.frames = stream.frames_read();
  stats.uncompressed_bytes = idx.totals().uncompressed_bytes;
  if (stats.frames != idx.frames().size()) return Status(ErrorCode::kCorrupt, "not every frame was read");
  return stats;
}

}  // namespace lazycache::format
