// SPDX-License-Identifier: MIT
// Corpus replay for builds without libFuzzer: runs LLVMFuzzerTestOneInput once on every file
// under the directories given, so `make test` (ASan+UBSan) re-checks every checked-in input and
// every past crash. Exits 1 when a directory holds no input (an empty corpus tests nothing).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  for (int i = 1; i < argc; ++i) {
    size_t count = 0;
    for (const auto& e : fs::recursive_directory_iterator(argv[i])) {
      if (!e.is_regular_file()) continue;
      std::ifstream f(e.path(), std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++count;
    }
    std::printf("%s: %zu inputs replayed\n", argv[i], count);
    if (count == 0) return 1;
  }
  return 0;
}
