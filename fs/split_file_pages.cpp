// SPDX-License-Identifier: MIT
#include "fs/split_file_pages.h"

#include <unistd.h>

#include <algorithm>

namespace lazycache::fs {

SplitFilePages::SplitFilePages(size_t max_pending, uint64_t page_size)
    : page_(page_size != 0 ? page_size : static_cast<uint64_t>(::sysconf(_SC_PAGESIZE))), max_pending_(max_pending) {}

size_t SplitFilePages::add(uint64_t file, uint64_t file_size, uint64_t part_offset, std::span<const char> part, const Offer& offer) {
  const uint64_t a = part_offset, b = part_offset + part.size();
  if (part.empty() || b > file_size) return 0;
  const uint64_t first_page = a / page_ * page_, last_page = b / page_ * page_;
  // Whole pages: from the first page boundary at or after a, to the last one at or before b (or
  // to the file's end, which the kernel accepts as a page's end).
  const uint64_t lo = a == first_page ? a : first_page + page_;
  const uint64_t hi = b == file_size ? b : last_page;
  std::vector<std::pair<uint64_t, std::string>> done;
  {
    std::lock_guard lock(mu_);
    if (a != first_page) contribute(file, file_size, first_page, a, part.first(std::min(b, first_page + page_) - a), done);
    // The page holding b, unless b ends the file or a page, or the part lies inside one page
    // (handled above).
    if (b != file_size && b != last_page && !(a != first_page && last_page == first_page))
      contribute(file, file_size, last_page, last_page, part.subspan(last_page - a), done);
  }
  size_t taken = 0;
  if (lo < hi && offer(lo, part.subspan(lo - a, hi - lo))) ++taken;
  for (auto& [offset, bytes] : done) taken += offer(offset, bytes) ? 1 : 0;
  return taken;
}

void SplitFilePages::contribute(uint64_t file, uint64_t file_size, uint64_t page_start, uint64_t from, std::span<const char> bytes,
                                std::vector<std::pair<uint64_t, std::string>>& done) {
  const auto key = std::make_pair(file, page_start);
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    if (pending_.size() >= max_pending_) return;
    Page p;
    const size_t size = static_cast<size_t>(std::min(page_, file_size - page_start));
    p.bytes.assign(size, '\0');
    p.have.assign(size, false);
    it = pending_.emplace(key, std::move(p)).first;
  }
  Page& p = it->second;
  const size_t at = static_cast<size_t>(from - page_start);
  std::copy(bytes.begin(), bytes.end(), p.bytes.begin() + static_cast<std::ptrdiff_t>(at));
  for (size_t i = at; i < at + bytes.size(); ++i) {
    if (!p.have[i]) ++p.count;
    p.have[i] = true;
  }
  if (p.count < p.bytes.size()) return;
  done.emplace_back(page_start, std::move(p.bytes));
  pending_.erase(it);
}

size_t SplitFilePages::pending() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

}  // namespace lazycache::fs
