// SPDX-License-Identifier: MIT
// lc-make-hostile OUTDIR: writes every hostile archive as OUTDIR/<name>.tar.zst and a manifest,
// OUTDIR/manifest.tsv (name, refuse_at, reason, entry, attack), for the CLI test and for humans.
#include <cstdio>
#include <fstream>
#include <iostream>

#include "common/byte_sink.h"
#include "tests/hostile/hostile_cases.h"

using namespace lazycache;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: lc-make-hostile OUTDIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  std::string manifest;
  for (const auto& c : hostile::make_hostile_cases()) {
    auto sink = LocalFileSink::create(dir + "/" + c.name + ".tar.zst");
    if (!sink.ok()) {
      std::cerr << "lc-make-hostile: " << sink.error().to_string() << "\n";
      return 1;
    }
    Status s = (*sink)->write(std::as_bytes(std::span<const char>(c.bytes)));
    if (s.ok()) s = (*sink)->commit();
    if (!s.ok()) {
      std::cerr << "lc-make-hostile: writing " << c.name << ": " << s.to_string() << "\n";
      return 1;
    }
    manifest += c.name + "\t" + hostile::refuse_at_name(c.refuse_at) + "\t" + c.reason + "\t" + c.entry + "\t" + c.attack + "\n";
  }
  auto sink = LocalFileSink::create(dir + "/manifest.tsv");
  Status s = sink.ok() ? (*sink)->write(std::as_bytes(std::span<const char>(manifest))) : sink.error();
  if (s.ok()) s = (*sink)->commit();
  if (!s.ok()) {
    std::cerr << "lc-make-hostile: writing the manifest: " << s.to_string() << "\n";
    return 1;
  }
  return 0;
}
