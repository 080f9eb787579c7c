// SPDX-License-Identifier: MIT
#include "tools/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace lazycache::cli {

std::string progress_line(const std::string& label, uint64_t files_done, uint64_t files_total, uint64_t bytes_done, uint64_t bytes_total,
                          double elapsed_seconds, const std::string& extra) {
  if (bytes_done == 0 && bytes_total == 0) {  // a count only (verify's frames)
    std::string line = label + ":";
    if (files_total > 0) line += " files " + std::to_string(files_done) + "/" + std::to_string(files_total);
    return extra.empty() ? line : line + " " + extra;
  }
  std::string line = label + ": " + human_bytes(bytes_done);
  char buf[96];
  if (bytes_total > 0) {
    std::snprintf(buf, sizeof buf, " of %s (%d%%)", human_bytes(bytes_total).c_str(),
                  static_cast<int>(100.0 * static_cast<double>(bytes_done) / static_cast<double>(bytes_total)));
    line += buf;
  }
  const double rate = elapsed_seconds > 0 ? static_cast<double>(bytes_done) / elapsed_seconds : 0;
  line += ", " + human_bytes(static_cast<uint64_t>(rate)) + "/s";
  if (bytes_total > bytes_done && rate > 0) {
    std::snprintf(buf, sizeof buf, ", ETA %.0f s", static_cast<double>(bytes_total - bytes_done) / rate);
    line += buf;
  }
  if (files_total > 0) line += "; files " + std::to_string(files_done) + "/" + std::to_string(files_total);
  if (!extra.empty()) line += "; " + extra;
  return line;
}

namespace {

// 5 s: a line often enough to show a job is alive, rarely enough not to flood the log.
std::chrono::steady_clock::duration line_interval() {
  double seconds = 5;
  if (const char* env = std::getenv("LAZYCACHE_PROGRESS_INTERVAL"); env && *env) seconds = std::strtod(env, nullptr);
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

Progress::Progress(std::string label, bool quiet) : label_("lazycache " + std::move(label)), interval_(line_interval()) {
  if (quiet) mode_ = Mode::kOff;
  else if (::isatty(STDERR_FILENO)) mode_ = Mode::kBar;
  else mode_ = interval_.count() > 0 ? Mode::kLines : Mode::kOff;
}

Progress::~Progress() { finish(); }

void Progress::update(uint64_t files_done, uint64_t files_total, uint64_t bytes_done, uint64_t bytes_total, const std::string& extra) {
  if (mode_ == Mode::kOff) return;
  auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (mode_ == Mode::kLines) {
    // The first line after one interval: a command that ends sooner prints none.
    if (now - (drawn_ ? last_ : start_) < interval_) return;
    last_ = now;
    drawn_ = true;
    std::string line = progress_line(label_, files_done, files_total, bytes_done, bytes_total, elapsed, extra) + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
    return;
  }
  if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  constexpr int kWidth = 20;
  const int filled = bytes_total > 0 ? static_cast<int>(kWidth * static_cast<double>(bytes_done) / static_cast<double>(bytes_total)) : 0;
  std::string bar = "[" + std::string(static_cast<size_t>(std::min(filled, kWidth)), '#') +
                    std::string(static_cast<size_t>(kWidth - std::min(filled, kWidth)), ' ') + "] ";
  std::string line = progress_line(label_, files_done, files_total, bytes_done, bytes_total, elapsed, extra);
  std::fprintf(stderr, "\r\033[K%s%s", bar.c_str(), line.c_str());
  std::fflush(stderr);
}

void Progress::finish() {
  if (!drawn_ || mode_ != Mode::kBar) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace lazycache::cli
