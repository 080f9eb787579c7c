// SPDX-License-Identifier: MIT
// lc-make-fuzz-seeds OUTDIR: writes seed inputs for the archive, seek-table, index and tar fuzz
// targets from forged archives (valid ones and the hostile corpus minus the memory bombs; the
// forge writes index version 1) and from archives of the real writers (index version 2: a full
// pack, and an incremental save over it that leaves a dead member), as OUTDIR/<target>/<name>.
// Regenerate the checked-in corpus with tests/fuzz/make_corpus.sh.
#include <unistd.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "common/byte_sink.h"
#include "format/archive_writer.h"
#include "format/incremental_writer.h"
#include "format/index_builder.h"
#include "format/le.h"
#include "tests/hostile/archive_forge.h"
#include "tests/hostile/hostile_cases.h"

using namespace lazycache;
using namespace lazycache::format;

namespace {

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// The index frame and the tar stream of an archive that opens (seek table trusted as written).
void split(const std::string& archive, std::string* index_frame, std::string* stream) {
  const auto* b = reinterpret_cast<const std::byte*>(archive.data());
  uint32_t n = load_le32(b + archive.size() - 9);
  uint64_t table = 8 + uint64_t{n} * 12 + 9;
  if (n == 0 || table > archive.size()) return;
  uint64_t off = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const std::byte* e = b + archive.size() - table + 8 + uint64_t{i} * 12;
    uint32_t c = load_le32(e), d = load_le32(e + 4);
    if (off + c > archive.size()) return;
    if (i + 1 == n) {
      *index_frame = archive.substr(off, c);
    } else {
      std::string out(d, '\0');
      size_t got = ZSTD_decompress(out.data(), out.size(), archive.data() + off, c);
      if (!ZSTD_isError(got)) *stream += out.substr(0, got);
    }
    off += c;
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// In `dir`: packs a small tree "t" in 16 KiB frames, then rewrites one small file and saves
// incrementally over the first archive. The file sits mid-stream in a unit of a dozen members
// (not the first unit, which the directories' moves would fill with dead bytes, nor the last,
// which is always rewritten), so its old copy stays as a dead member.
// Returns {"written_v2", "written_v2_dead"} archives.
Result<std::vector<std::pair<std::string, std::string>>> written_archives(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir + "/t/sub");
  std::ofstream(dir + "/t/a.txt") << "alpha\n";
  for (int i = 0; i < 40; ++i) std::ofstream(dir + "/t/sub/f" + std::to_string(i)) << std::string(300, static_cast<char>('a' + i));
  std::ofstream(dir + "/t/sub/c.txt") << std::string(4500, 'c');
  fs::create_symlink("../a.txt", dir + "/t/sub/link");
  const fs::path old_cwd = fs::current_path();
  fs::current_path(dir);
  PackConfig config;
  config.frame_size_bytes = 16384;
  config.threads = 1;
  config.hot_paths = {"t/sub/c.txt"};
  config.warn = [](const std::string&) {};
  std::vector<std::pair<std::string, std::string>> out;
  Status status = [&]() -> Status {
    LC_ASSIGN_OR_RETURN(auto sink, LocalFileSink::create(dir + "/v2"));
    LC_RETURN_IF_ERROR(write_archive({PackRoot{"t"}}, *sink, config).status());
    out.emplace_back("written_v2", slurp(dir + "/v2"));
    // Same size, same header: only the content differs, so the old member is superseded.
    std::ofstream(dir + "/t/sub/f25") << std::string(300, 'Z');
    std::string index_frame, stream;
    split(out.back().second, &index_frame, &stream);
    LC_ASSIGN_OR_RETURN(ByteBuffer raw, unwrap_index_frame(std::as_bytes(std::span<const char>(index_frame))));
    LC_ASSIGN_OR_RETURN(auto index, Index::parse(std::move(raw)));
    const std::string base_bytes = out.back().second;
    IncrementalBase base{index, [&](uint32_t first, uint32_t last) -> Result<std::string> {
                           const auto frames = index->frames();
                           const uint64_t from = frames[first].compressed_offset;
                           return base_bytes.substr(from, frames[last].compressed_offset + frames[last].compressed_size - from);
                         }};
    LC_ASSIGN_OR_RETURN(auto sink2, LocalFileSink::create(dir + "/v2dead"));
    LC_RETURN_IF_ERROR(write_incremental_archive({PackRoot{"t"}}, base, {"t/sub/f25"}, *sink2, config).status());
    out.emplace_back("written_v2_dead", slurp(dir + "/v2dead"));
    return Status();
  }();
  fs::current_path(old_cwd);
  if (!status.ok()) return status;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: lc-make-fuzz-seeds OUTDIR\n";
    return 2;
  }
  namespace fs = std::filesystem;
  const std::string out = argv[1];
  for (const char* t : {"fuzz_archive", "fuzz_seek_table", "fuzz_index", "fuzz_tar_reader"}) fs::create_directories(out + "/" + t);

  std::vector<std::pair<std::string, std::string>> archives;
  {
    hostile::ArchiveForge f;
    f.add_file(f.root(), "a.txt", "alpha\n");
    uint32_t sub = f.add_dir(f.root(), "sub");
    uint32_t b = f.add_file(sub, "b.txt", std::string(3000, 'b'));
    f.add_hardlink(f.root(), "hard", b);
    f.add_symlink(sub, "link", "../a.txt");
    f.model().nodes[b].xattrs.push_back(Xattr{"user.k", "v"});
    auto bytes = f.build(hostile::ForgeHooks{}, 1024);
    if (!bytes.ok()) {
      std::cerr << bytes.error().to_string() << "\n";
      return 1;
    }
    archives.emplace_back("valid_small", *bytes);
  }
  {
    char tmpl[] = "/tmp/lc-fuzz-seeds-XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    auto written = written_archives(tmpl);
    std::filesystem::remove_all(tmpl);
    if (!written.ok()) {
      std::cerr << written.error().to_string() << "\n";
      return 1;
    }
    for (auto& a : *written) archives.push_back(std::move(a));
  }
  for (const auto& c : hostile::make_hostile_cases()) {
    if (c.name == "index_bomb" || c.name == "deep_nesting") continue;  // slow seeds help no one
    archives.emplace_back(c.name, c.bytes);
  }
  for (const auto& [name, bytes] : archives) {
    write(out + "/fuzz_archive/" + name, bytes);
    write(out + "/fuzz_seek_table/" + name, bytes.substr(bytes.size() > 512 ? bytes.size() - 512 : 0));
    std::string index_frame, stream;
    split(bytes, &index_frame, &stream);
    if (!index_frame.empty()) {
      write(out + "/fuzz_index/" + name + ".frame", std::string(1, '\1') + index_frame);
      auto raw = unwrap_index_frame(std::as_bytes(std::span<const char>(index_frame)));
      if (raw.ok()) write(out + "/fuzz_index/" + name + ".raw", std::string(1, '\0') + std::string(raw->view()));
    }
    if (!stream.empty()) write(out + "/fuzz_tar_reader/" + name, stream.substr(0, 64 * 1024));
  }
  return 0;
}
