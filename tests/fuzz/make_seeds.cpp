// SPDX-License-Identifier: MIT
// lc-make-fuzz-seeds OUTDIR: writes seed inputs for the archive, seek-table, index and tar fuzz
// targets from forged archives (valid ones and the hostile corpus minus the memory bombs), as
// OUTDIR/<target>/<name>. Regenerate the checked-in corpus with tests/fuzz/make_corpus.sh.
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "format/index_builder.h"
#include "format/le.h"
#include "tests/hostile/archive_forge.h"
#include "tests/hostile/hostile_cases.h"

using namespace lazycache;
using namespace lazycache::format;

namespace {

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

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
      if (raw.ok()) write(out + "/fuzz_index/" + name + ".raw", std::string(1, '\0') + *raw);
    }
    if (!stream.empty()) write(out + "/fuzz_tar_reader/" + name, stream.substr(0, 64 * 1024));
  }
  return 0;
}
