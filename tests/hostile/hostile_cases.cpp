// SPDX-License-Identifier: MIT
#include "tests/hostile/hostile_cases.h"

#include <zstd.h>

#include <stdexcept>
#include <tuple>

#include "format/le.h"
#include "tests/hostile/archive_forge.h"

namespace lazycache::hostile {

using namespace lazycache::format;

namespace {

// Index v1 entry record field offsets (format/index_builder.cpp writes them in this order).
constexpr int kDeepLevels = 300;
constexpr size_t kParent = 0, kSize = 32, kDataOffset = 40, kLinkGroup = 48;

std::string must(Result<std::string> r, const std::string& name) {
  if (!r.ok()) throw std::runtime_error("forging " + name + ": " + r.error().to_string());
  return std::move(r).value();
}

// A small valid tree most cases start from: data/{a.txt, sub/b.txt}.
ArchiveForge base_tree() {
  ArchiveForge f;
  f.add_file(f.root(), "a.txt", "alpha\n");
  uint32_t sub = f.add_dir(f.root(), "sub");
  f.add_file(sub, "b.txt", "bravo\n");
  return f;
}

// A zstd frame whose content is `bytes` zero bytes, optionally without Frame_Content_Size.
std::string zeros_frame(size_t bytes, bool with_content_size) {
  std::string zeros(bytes, '\0');
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, with_content_size ? 1 : 0);
  std::string out(ZSTD_compressBound(bytes), '\0');
  size_t n;
  if (with_content_size) {
    n = ZSTD_compress2(cctx, out.data(), out.size(), zeros.data(), zeros.size());
  } else {
    // Streaming without a pledged size: the frame header carries no content size.
    ZSTD_inBuffer in{zeros.data(), zeros.size(), 0};
    ZSTD_outBuffer o{out.data(), out.size(), 0};
    n = ZSTD_compressStream2(cctx, &o, &in, ZSTD_e_end);
    n = ZSTD_isError(n) ? n : o.pos;
  }
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n)) throw std::runtime_error("zstd failed in the forge");
  out.resize(n);
  return out;
}

// A zstd frame header that promises `content_size` bytes followed by one tiny RLE block: what
// an attacker sends to make a reader allocate content_size bytes up front.
std::string lying_frame(uint64_t content_size) {
  std::string f;
  put_le32(f, kZstdFrameMagic);
  f.push_back(static_cast<char>(0xE0));  // FCS field 8 bytes, single segment, no checksum
  put_le64(f, content_size);
  // Block header: last block, type RLE (1), block size 16; then the byte to repeat.
  uint32_t bh = 1u | (1u << 1) | (16u << 3);
  f.push_back(static_cast<char>(bh & 0xff));
  f.push_back(static_cast<char>((bh >> 8) & 0xff));
  f.push_back(static_cast<char>((bh >> 16) & 0xff));
  f.push_back('A');
  return f;
}

}  // namespace

const char* refuse_at_name(RefuseAt r) {
  switch (r) {
    case RefuseAt::kOpen: return "open";
    case RefuseAt::kRead: return "read";
    case RefuseAt::kExtract: return "extract";
    case RefuseAt::kNever: return "never";
  }
  return "?";
}

std::vector<HostileCase> make_hostile_cases() {
  std::vector<HostileCase> out;
  auto add = [&](std::string name, std::string attack, RefuseAt at, std::string reason, std::string entry, const ArchiveForge& f,
                 const ForgeHooks& hooks = ForgeHooks{}, uint64_t frame_bytes = 64 * 1024) {
    std::string bytes = must(f.build(hooks, frame_bytes), name);
    out.push_back(HostileCase{std::move(name), std::move(attack), at, std::move(reason), std::move(entry), std::move(bytes)});
  };

  // ---- names ----
  for (auto [name, bad, why] :
       {std::tuple{"name_dotdot", std::string(".."), "'..' as an entry name"},
        std::tuple{"name_dot", std::string("."), "'.' as an entry name"},
        std::tuple{"name_absolute", std::string("/etc/passwd"), "an absolute path as a name"},
        std::tuple{"name_slash", std::string("a/../../b"), "a name with '/' (a path in one name)"},
        std::tuple{"name_nul", std::string("ok\0evil", 7), "a name with NUL"}, std::tuple{"name_empty", std::string(), "an empty name"},
        std::tuple{"name_too_long", std::string(300, 'n'), "a 300-byte name (NAME_MAX is 255)"}}) {
    ArchiveForge f = base_tree();
    f.add_file(f.root(), bad, "payload\n");
    std::string printable = bad.find('\0') == std::string::npos && !bad.empty() && bad.size() < 100 ? bad : "";
    add(name, why, RefuseAt::kOpen, "invalid name", printable, f);
  }

  {
    // Refused for its '/'; the message must show the terminal escape as text, not send it.
    ArchiveForge f = base_tree();
    f.add_file(f.root(), std::string("x/\x1b[2J\ny"), "payload\n");
    add("name_terminal_escape", "a name with '/', a terminal escape sequence and a newline", RefuseAt::kOpen, "invalid name",
        "x/\\x1b[2J\\ny", f);
  }

  // ---- duplicates and a symlink and a directory under one name ----
  {
    ArchiveForge f = base_tree();
    f.add_file(f.root(), "dup.txt", "first\n");
    f.add_file(f.root(), "dup.txt", "second\n");
    add("duplicate_entries", "two entries with the same name in one directory", RefuseAt::kOpen, "sorted", "dup.txt", f);
  }
  {
    ArchiveForge f = base_tree();
    f.add_symlink(f.root(), "l", "/tmp");
    uint32_t d = f.add_dir(f.root(), "l");
    f.add_file(d, "x", "written through the symlink?\n");
    add("symlink_then_file_through_it", "symlink l -> /tmp, then a file l/x (tar's classic escape)", RefuseAt::kOpen, "sorted", "l", f);
  }

  // ---- links ----
  {
    ArchiveForge f = base_tree();
    uint32_t h = f.add_file(f.root(), "h", "x");
    ForgeHooks hooks;
    uint32_t id = f.entry_ids()[h];
    hooks.on_raw_index = [id](std::string& raw) { ArchiveForge::patch_entry(raw, id, kLinkGroup, 0x7fffffff, 4); };
    add("hardlink_out_of_range", "a hardlink to an entry that does not exist (outside the archive)", RefuseAt::kOpen,
        "link group out of range", "h", f, hooks);
  }
  {
    ArchiveForge f = base_tree();
    uint32_t h = f.add_file(f.root(), "h", "x");
    ForgeHooks hooks;
    auto ids = f.entry_ids();
    uint32_t id = ids[h], dir = ids[f.root()];
    hooks.on_raw_index = [id, dir](std::string& raw) { ArchiveForge::patch_entry(raw, id, kLinkGroup, dir, 4); };
    add("hardlink_to_directory", "a hardlink whose target is a directory", RefuseAt::kOpen, "hardlink", "h", f, hooks);
  }
  // Absolute and escaping symlinks are created as saved, like tar (issue 16), and never
  // followed: these must extract, and nothing may appear outside (the test checks).
  {
    ArchiveForge f = base_tree();
    f.add_symlink(f.root(), "abs", "/etc");
    add("symlink_absolute", "a symlink to an absolute path outside the target", RefuseAt::kNever, "", "abs", f);
  }
  {
    ArchiveForge f = base_tree();
    uint32_t d = f.add_dir(f.root(), "d");
    f.add_symlink(d, "up", "../../../../../../outside");
    add("symlink_relative_escape", "a relative symlink climbing above the target", RefuseAt::kNever, "", "up", f);
  }
  {
    // The chain of issue 13 item 9: the link text of esc climbs only as far as it descends.
    ArchiveForge f = base_tree();
    uint32_t d = f.add_dir(f.root(), "d");
    f.add_symlink(d, "up", "..");
    f.add_symlink(d, "esc", "up/../../../outside");
    add("symlink_chain_escape", "symlinks up -> .., esc -> up/../../../outside (escapes only through the chain)", RefuseAt::kNever, "",
        "esc", f);
  }

  // ---- root paths: restore and mount write at them ----
  for (const auto& [name, path, why] : {std::tuple{"root_path_slash", "/", "a root saved from '/' (restore would write at /)"},
                                        std::tuple{"root_path_double_slash", "/hostile//data", "a root path with an empty segment"},
                                        std::tuple{"root_path_trailing_slash", "/hostile/data/", "a root path with a trailing '/'"}}) {
    ArchiveForge f(path);
    f.add_file(f.root(), "a.txt", "alpha\n");
    add(name, why, RefuseAt::kOpen, "original path", "", f);
  }
  {
    // The original path must end in the root entry's path, as pack writes it.
    ArchiveForge f("/hostile/elsewhere");
    f.add_file(f.root(), "a.txt", "alpha\n");
    add("root_path_not_entry_path", "a root path that does not end in its entry's path", RefuseAt::kOpen, "member prefix", "", f);
  }
  {
    // Restore writes each root at its path: a root inside another could sit under a symlink
    // the first one creates.
    ArchiveForge f = base_tree();
    uint32_t sub = 0;
    for (uint32_t i = 0; i < f.model().nodes.size(); ++i)
      if (f.model().nodes[i].name == "sub") sub = i;
    f.model().roots.push_back(format::IndexRootSpec{"/hostile/data/sub", "data/sub", sub});
    add("roots_nested", "a second root saved from inside the first", RefuseAt::kOpen, "overlaps", "", f);
  }
  {
    // A directory with a child whose entry turns into a symlink (a tar stream's "symlink
    // replacing a directory mid-archive", as an index can say it): the child would be written
    // through the link.
    ArchiveForge f = base_tree();
    uint32_t d = f.add_dir(f.root(), "d");
    f.add_file(d, "x", "through the link?\n");
    ForgeHooks hooks;
    uint32_t id = f.entry_ids()[d];
    hooks.on_raw_index = [id](std::string& raw) {
      ArchiveForge::patch_entry(raw, id, 4, static_cast<uint8_t>(format::EntryType::kSymlink), 1);
    };
    hooks.recompute_index_checksum = true;
    add("symlink_replacing_directory", "a directory entry with a child, retyped as a symlink", RefuseAt::kOpen, "", "", f, hooks);
  }
  {
    // listxattr(2) would report "user.a" and "b" for the name "user.a\0b".
    ArchiveForge f = base_tree();
    uint32_t x = f.add_file(f.root(), "x", "payload\n");
    f.model().nodes[x].xattrs.push_back(format::Xattr{"user.aXb", "v"});
    ForgeHooks hooks;
    hooks.on_raw_index = [](std::string& raw) {
      size_t at = raw.find("user.aXb");
      if (at != std::string::npos) raw[at + 6] = '\0';
    };
    add("xattr_name_nul", "an xattr name with an embedded NUL", RefuseAt::kOpen, "NUL", "", f, hooks);
  }

  // ---- sizes ----
  {
    ArchiveForge f = base_tree();
    uint32_t big = f.add_file(f.root(), "big.bin", "tiny");
    ForgeHooks hooks;
    uint32_t id = f.entry_ids()[big];
    hooks.on_raw_index = [id](std::string& raw) { ArchiveForge::patch_entry(raw, id, kSize, 1ull << 62, 8); };
    add("enormous_size", "a file declaring 2^62 bytes", RefuseAt::kOpen, "outside the tar stream", "big.bin", f, hooks);
  }
  {
    ArchiveForge f = base_tree();
    uint32_t w = f.add_file(f.root(), "wrap.bin", "tiny");
    ForgeHooks hooks;
    uint32_t id = f.entry_ids()[w];
    hooks.on_raw_index = [id](std::string& raw) {
      ArchiveForge::patch_entry(raw, id, kDataOffset, ~0ull - 10, 8);
      ArchiveForge::patch_entry(raw, id, kSize, 100, 8);
    };
    add("offset_wraps", "data offset + size overflowing 64 bits", RefuseAt::kOpen, "outside the tar stream", "wrap.bin", f, hooks);
  }

  // ---- frame tables ----
  // 130000 bytes of data: three 64 KiB frames, the last holding only padding and the end blocks.
  auto three_frames = [] {
    ArchiveForge f;
    std::string data(130000, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 7 + i / 251) % 256);
    f.add_file(f.root(), "f.bin", data);
    return f;
  };
  {
    ForgeHooks hooks;
    hooks.on_model = [](IndexModel& m) { m.frames[1].compressed_offset = m.frames[0].compressed_offset; };
    add("frames_overlap", "index frame table with two frames at one offset", RefuseAt::kOpen, "contiguous", "", three_frames(), hooks);
  }
  {
    ForgeHooks hooks;
    hooks.on_seek_entries = [](std::vector<SeekEntry>& s) { s[1].compressed_size += 1000000; };
    add("frame_past_end", "seek table frame extending past the end of the object", RefuseAt::kOpen, "seek table", "", three_frames(),
        hooks);
  }
  {
    ForgeHooks hooks;
    hooks.on_model = [](IndexModel& m) { m.frames.pop_back(); };
    add("index_seek_count_disagree", "index lists fewer frames than the seek table", RefuseAt::kOpen, "data frames", "", three_frames(),
        hooks);
  }
  {
    ForgeHooks hooks;
    hooks.on_model = [](IndexModel& m) { m.frames[0].xxh64_low32 ^= 1; };
    add("index_seek_checksum_disagree", "index and seek table disagree on a frame checksum", RefuseAt::kOpen, "differs", "", three_frames(),
        hooks);
  }
  {
    ForgeHooks hooks;
    hooks.on_object = [](std::string& o) { o[o.size() - 5] = static_cast<char>(0x84); };
    add("seek_reserved_bits", "seek table descriptor with reserved bits set", RefuseAt::kOpen, "reserved", "", base_tree(), hooks);
  }
  {
    ForgeHooks hooks;
    hooks.on_object = [](std::string& o) {
      std::string n;
      put_le32(n, 0x7ffffff);
      o.replace(o.size() - 9, 4, n);
    };
    add("seek_huge_count", "seek table footer claiming 134 million frames in a tiny object", RefuseAt::kOpen, "seek table", "", base_tree(),
        hooks);
  }
  {
    ForgeHooks hooks;
    hooks.on_raw_index = [](std::string& raw) { raw[200] ^= 0x40; };
    hooks.recompute_index_checksum = false;
    add("index_checksum", "one flipped bit in the index", RefuseAt::kOpen, "checksum", "", base_tree(), hooks);
  }
  {
    ArchiveForge f = base_tree();
    uint32_t b = f.add_file(f.root(), "cyc", "c");
    ForgeHooks hooks;
    uint32_t id = f.entry_ids()[b];
    hooks.on_raw_index = [id](std::string& raw) { ArchiveForge::patch_entry(raw, id, kParent, id, 4); };
    add("parent_cycle", "an entry that is its own parent (a loop in the tree)", RefuseAt::kOpen, "parent", "cyc", f, hooks);
  }

  // ---- bombs ----
  {
    ArchiveForge f;
    f.add_file(f.root(), "bomb.bin", std::string(1000, 'b'));
    ForgeHooks hooks;
    hooks.on_compressed_frames = [](std::vector<std::string>& frames) { frames[0] = zeros_frame(64u << 20, true); };
    add("zstd_bomb_declared", "a ~2 KB data frame that expands to 64 MiB, declared in its header", RefuseAt::kRead, "Frame_Content_Size",
        "", f, hooks);
  }
  {
    ArchiveForge f;
    f.add_file(f.root(), "bomb.bin", std::string(1000, 'b'));
    ForgeHooks hooks;
    hooks.on_compressed_frames = [](std::vector<std::string>& frames) { frames[0] = zeros_frame(64u << 20, false); };
    add("zstd_bomb_undeclared", "a ~2 KB data frame that expands to 64 MiB, without a content size", RefuseAt::kRead, "Frame_Content_Size",
        "", f, hooks);
  }
  {
    ForgeHooks hooks;
    // The index container and its zstd header both promise 1 GiB; the frame holds 16 bytes.
    hooks.on_index_frame = [](std::string& frame) {
      std::string body = lying_frame(1ull << 30);
      std::string head;
      put_le32(head, kIndexFrameMagic);
      put_le32(head, static_cast<uint32_t>(kIndexContainerHeaderBytes + body.size()));
      put_le32(head, kIndexContainerMagic);
      put_le32(head, kIndexCodecZstd);
      put_le64(head, 1ull << 30);
      frame = head + body;
    };
    add("index_bomb", "a 60-byte index frame promising a 1 GiB index", RefuseAt::kOpen, "index", "", base_tree(), hooks);
  }

  // ---- shapes that are valid but must not crash or escape ----
  {
    ArchiveForge f;
    uint32_t d = f.root();
    for (int i = 0; i < kDeepLevels; ++i) d = f.add_dir(d, "d");
    f.add_file(d, "deep.txt", "bottom\n");
    add("deep_nesting", "300 nested directories", RefuseAt::kNever, "", "", f);
  }
  {
    ArchiveForge f("/hostile/../../../etc");
    f.add_file(f.root(), "passwd", "root::0:0::/:/bin/sh\n");
    add("root_path_dotdot", "a root whose original path climbs with '..' (restore would write to /etc)", RefuseAt::kOpen, "root", "", f);
  }
  {
    ArchiveForge f("relative/path");
    f.add_file(f.root(), "x", "x");
    add("root_path_relative", "a root with a relative original path", RefuseAt::kOpen, "root", "", f);
  }
  return out;
}

}  // namespace lazycache::hostile
