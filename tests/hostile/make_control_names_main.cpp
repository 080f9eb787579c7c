// SPDX-License-Identifier: MIT
// lc-make-control-names OUT: writes one archive whose root path, tool version, entry names,
// symlink target and xattr name hold ESC sequences, BEL, newlines that draw a fake
// "lazycache:" line, and a UTF-8 C1 CSI. A legal archive otherwise: every output path must
// print these quoted (tests/hostile/control_names_test.sh), never raw.
#include <iostream>
#include <span>

#include "common/byte_sink.h"
#include "tests/hostile/archive_forge.h"

using namespace lazycache;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: lc-make-control-names OUT\n";
    return 2;
  }
  hostile::ArchiveForge forge("/hostile/\x1b]0;pwned\x07root\nlazycache: FAKE root line/data");
  const uint32_t dir = forge.add_dir(forge.root(), "dir\x1b[2J");
  const uint32_t file = forge.add_file(dir, "file\nlazycache: FAKE name line", "hello\n");
  forge.add_file(forge.root(),
                 "csi\xc2\x9b"
                 "31m",
                 "x");
  forge.add_symlink(forge.root(), "link", "target\x1b[0m\nlazycache: FAKE target line");
  forge.model().nodes[file].xattrs.push_back({"user.x\x1b[1m\nlazycache: FAKE xattr line", "v"});
  forge.model().tool_version = "lazycache 9\x1b[8m\nlazycache: FAKE version line";
  auto bytes = forge.build();
  if (!bytes.ok()) {
    std::cerr << "lc-make-control-names: " << bytes.error().to_string() << "\n";
    return 1;
  }
  auto sink = LocalFileSink::create(argv[1]);
  Status s = sink.ok() ? (*sink)->write(std::as_bytes(std::span<const char>(*bytes))) : sink.error();
  if (s.ok()) s = (*sink)->commit();
  if (!s.ok()) {
    std::cerr << "lc-make-control-names: " << s.to_string() << "\n";
    return 1;
  }
  return 0;
}
