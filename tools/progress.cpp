// SPDX-License-Identifier: MIT
#include "tools/progress.h"

#include <unistd.h>

#include <cstdio>

namespace lazycache::cli {

std::string human_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

Progress::Progress(std::string label, bool quiet) : label_(std::move(label)), enabled_(!quiet && ::isatty(STDERR_FILENO)) {}

Progress::~Progress() { finish(); }

void Progress::update(uint64_t files_done, uint64_t files_total, uint64_t bytes_done, uint64_t bytes_total, const std::string& extra) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  std::fprintf(stderr, "\r\033[K%s  files %llu/%llu  %s/%s%s%s", label_.c_str(), static_cast<unsigned long long>(files_done),
               static_cast<unsigned long long>(files_total), human_bytes(bytes_done).c_str(), human_bytes(bytes_total).c_str(),
               extra.empty() ? "" : "  ", extra.c_str());
  std::fflush(stderr);
}

void Progress::finish() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace lazycache::cli
