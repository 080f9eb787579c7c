// SPDX-License-Identifier: MIT
#include "tests/hostile/archive_forge.h"

#include <algorithm>

#include "format/frame_codec.h"
#include "format/hashing.h"
#include "format/le.h"
#include "format/tar.h"

namespace lazycache::hostile {

using namespace lazycache::format;

namespace {

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span<const char>(s)); }

// Tar headers cannot carry NUL in a name; the index (what extract trusts) keeps the real name.
std::string tar_safe(std::string path) {
  std::replace(path.begin(), path.end(), '\0', '_');
  return path;
}

}  // namespace

ArchiveForge::ArchiveForge(std::string original_path) {
  IndexNode top;
  top.type = EntryType::kDirectory;
  model_.nodes.push_back(top);
  contents_.emplace_back();
  IndexNode data;
  data.name = "data";
  data.type = EntryType::kDirectory;
  add(0, data);
  model_.roots.push_back(IndexRootSpec{std::move(original_path), "data", 1});
  model_.tool_version = "lazycache-hostile-forge";
}

uint32_t ArchiveForge::add(uint32_t parent, IndexNode node) {
  auto id = static_cast<uint32_t>(model_.nodes.size());
  node.parent = parent;
  if (node.link_group == 0) node.link_group = id;
  model_.nodes.push_back(std::move(node));
  model_.nodes[parent].children.push_back(id);
  contents_.emplace_back();
  return id;
}

uint32_t ArchiveForge::add_dir(uint32_t parent, std::string name, uint32_t mode) {
  IndexNode n;
  n.name = std::move(name);
  n.type = EntryType::kDirectory;
  n.mode = mode;
  n.mtime_ns = 1'600'000'000'000'000'000;
  return add(parent, std::move(n));
}

uint32_t ArchiveForge::add_file(uint32_t parent, std::string name, std::string content, uint32_t mode) {
  IndexNode n;
  n.name = std::move(name);
  n.type = EntryType::kRegular;
  n.mode = mode;
  n.size = content.size();
  n.content_digest = xxh3_128(bytes_of(content));
  n.mtime_ns = 1'600'000'000'000'000'000;
  uint32_t id = add(parent, std::move(n));
  contents_[id] = std::move(content);
  return id;
}

uint32_t ArchiveForge::add_symlink(uint32_t parent, std::string name, std::string target) {
  IndexNode n;
  n.name = std::move(name);
  n.type = EntryType::kSymlink;
  n.mode = 0777;
  n.size = target.size();
  n.symlink_target = std::move(target);
  return add(parent, std::move(n));
}

uint32_t ArchiveForge::add_hardlink(uint32_t parent, std::string name, uint32_t leader) {
  IndexNode n = model_.nodes[leader];
  n.name = std::move(name);
  n.children.clear();
  n.link_group = leader;
  uint32_t id = add(parent, std::move(n));
  uint32_t links = 0;
  for (const auto& node : model_.nodes) links += node.link_group == leader ? 1 : 0;
  for (auto& node : model_.nodes) {
    if (node.link_group == leader) node.nlink = links;
  }
  return id;
}

std::vector<uint32_t> ArchiveForge::entry_ids() const {
  // The same breadth-first numbering as serialize_index: children sorted bytewise by name.
  std::vector<uint32_t> id_of(model_.nodes.size(), UINT32_MAX), order{0};
  id_of[0] = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    auto kids = model_.nodes[order[i]].children;
    std::stable_sort(kids.begin(), kids.end(), [&](uint32_t a, uint32_t b) { return model_.nodes[a].name < model_.nodes[b].name; });
    for (uint32_t c : kids) {
      id_of[c] = static_cast<uint32_t>(order.size());
      order.push_back(c);
    }
  }
  return id_of;
}

void ArchiveForge::patch_entry(std::string& raw, uint32_t entry_id, size_t field_offset, uint64_t value, int width) {
  size_t at = kIndexHeaderBytes + size_t{entry_id} * kIndexEntryBytes + field_offset;
  if (at + static_cast<size_t>(width) > raw.size()) return;
  store_le(reinterpret_cast<std::byte*>(raw.data() + at), value, width);
}

void ArchiveForge::fix_index_checksum(std::string& raw) {
  if (raw.size() < 8) return;
  raw.resize(raw.size() - 8);
  put_le64(raw, xxh3_64(bytes_of(raw)));
}

Result<std::string> ArchiveForge::build(const ForgeHooks& hooks, uint64_t frame_bytes) const {
  IndexModel model = model_;
  // The tar stream, depth first in insertion order; data offsets recorded per node.
  std::string stream;
  std::vector<std::string> paths(model.nodes.size());
  std::vector<uint32_t> stack{0};
  while (!stack.empty()) {
    uint32_t id = stack.back();
    stack.pop_back();
    IndexNode& n = model.nodes[id];
    if (id != 0) {
      paths[id] = (n.parent == 0 ? "" : paths[n.parent] + "/") + n.name;
      TarMember m;
      m.path = tar_safe(paths[id]);
      m.mode = n.mode;
      m.mtime_ns = n.mtime_ns;
      if (n.type == EntryType::kDirectory) {
        m.type = TarType::kDirectory;
      } else if (n.type == EntryType::kSymlink) {
        m.type = TarType::kSymlink;
        m.linkname = n.symlink_target;
      } else if (n.link_group != id) {
        m.type = TarType::kHardlink;
        m.linkname = tar_safe(paths[n.link_group]);
      } else {
        m.size = contents_[id].size();
      }
      stream += tar_header_bytes(m);
      if (n.type == EntryType::kRegular && n.link_group == id) {
        n.data_offset = stream.size();
        stream += contents_[id];
        stream.append(tar_padding(contents_[id].size()), '\0');
      } else if (n.type == EntryType::kRegular) {
        n.data_offset = model.nodes[n.link_group].data_offset;
      }
    }
    for (auto it = n.children.rbegin(); it != n.children.rend(); ++it) stack.push_back(*it);
  }
  stream += tar_end_blocks();

  std::vector<std::string> compressed;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // uncompressed offset, length per frame
  for (uint64_t u_off = 0; u_off < stream.size(); u_off += frame_bytes) {
    uint64_t len = std::min<uint64_t>(frame_bytes, stream.size() - u_off);
    LC_ASSIGN_OR_RETURN(std::string c, compress_frame(bytes_of(stream).subspan(u_off, len), 3));
    compressed.push_back(std::move(c));
    ranges.emplace_back(u_off, len);
  }
  if (hooks.on_compressed_frames) hooks.on_compressed_frames(compressed);
  // Sizes and digests follow the (possibly replaced) compressed bytes, so a hostile frame is
  // consistent with every table and only its content is wrong.
  std::vector<SeekEntry> seek;
  uint64_t c_off = 0;
  for (size_t i = 0; i < compressed.size(); ++i) {
    auto raw = bytes_of(stream).subspan(ranges[i].first, ranges[i].second);
    const std::string& c = compressed[i];
    FrameInfo f{c_off,
                static_cast<uint32_t>(c.size()),
                ranges[i].first,
                static_cast<uint32_t>(ranges[i].second),
                xxh64_low32(raw),
                xxh3_128(bytes_of(c))};
    model.frames.push_back(f);
    seek.push_back(SeekEntry{f.compressed_offset, f.compressed_size, f.uncompressed_offset, f.uncompressed_size, f.xxh64_low32});
    c_off += c.size();
  }
  for (const auto& n : model.nodes) {
    if (n.type == EntryType::kRegular) {
      ++model.totals.file_count;
      model.totals.file_bytes += n.size;
    } else if (n.type == EntryType::kSymlink) {
      ++model.totals.symlink_count;
    } else {
      ++model.totals.dir_count;
    }
  }
  model.totals.uncompressed_bytes = stream.size();
  model.totals.compressed_bytes = c_off;
  if (hooks.on_model) hooks.on_model(model);

  LC_ASSIGN_OR_RETURN(std::string raw_index, serialize_index(model));
  if (hooks.on_raw_index) {
    hooks.on_raw_index(raw_index);
    if (hooks.recompute_index_checksum) fix_index_checksum(raw_index);
  }
  LC_ASSIGN_OR_RETURN(std::string index_frame, build_index_frame(raw_index, 3));
  if (hooks.on_index_frame) hooks.on_index_frame(index_frame);
  seek.push_back(SeekEntry{c_off, static_cast<uint32_t>(index_frame.size()), stream.size(), 0, xxh64_low32({})});
  if (hooks.on_seek_entries) hooks.on_seek_entries(seek);

  std::string object;
  for (const auto& c : compressed) object += c;
  object += index_frame;
  object += SeekTable::serialize(seek);
  if (hooks.on_object) hooks.on_object(object);
  return object;
}

}  // namespace lazycache::hostile
