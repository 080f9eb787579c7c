// SPDX-License-Identifier: MIT
// File: fs/split_file_pages.h -- SplitFilePages: the page-cache hand-off of files that span
// frames, as whole pages.
//
// Why: the hand-off (Filesystem::add_page_cache_sink) gave the kernel only files wholly inside a
// decoded frame, so every READ of a file cut across frames (a 6-9 MB JavaScript bundle, a shared
// library, a jar) came back to the daemon, and each cost a decode of its frames once the idle
// trim had dropped them (node's partial job after a 4 s pause: 98 READs, 21 decodes, 130 ms).
// The kernel takes bytes at any offset (FUSE notify_store) but marks a page up to date only when
// one store fills it from its start (or up to the file's end); a page that straddles a frame
// boundary would stay a READ. So the part of a file that one frame holds is offered as its whole
// pages, and each page that straddles a boundary is assembled here from the parts of the frames
// on either side and offered once they all came, whichever frame is decoded first.
//
// Memory: one page (plus a bit per byte) per boundary inside a file whose first side came and
// whose other has not: at most two per frame, and `max_pending` of them in all (beyond it a part's
// straddling pages are simply not kept: their READ serves them).
// Thread-safe: one mutex guards the pending pages; `offer` runs with no lock held.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace lazycache::fs {

class SplitFilePages {
 public:
  // Offers `bytes` at byte `offset` of the file; true when the kernel took them.
  using Offer = std::function<bool(uint64_t offset, std::span<const char> bytes)>;

  // `page_size`: the kernel's (0: sysconf's).
  explicit SplitFilePages(size_t max_pending, uint64_t page_size = 0);

  // Bytes [part_offset, part_offset + part.size()) of file `file` (of `file_size` bytes) came
  // with one decoded frame. Offers the whole pages inside the part (one call) and every straddling
  // page this part completes (one call each); keeps this part's share of the others. Returns the
  // number of offers the kernel took.
  size_t add(uint64_t file, uint64_t file_size, uint64_t part_offset, std::span<const char> part, const Offer& offer);

  // Straddling pages waiting for a neighbouring frame.
  size_t pending() const;

 private:
  struct Page {
    std::string bytes;       // the page's bytes (min(page, file_size - page start) of them)
    std::vector<bool> have;  // which of them came
    size_t count = 0;        // how many came
  };
  // Copies `bytes` (which start at `from`, inside the page at `page_start`) into that page's
  // pending entry; when it is complete, moves it to `done`.
  void contribute(uint64_t file, uint64_t file_size, uint64_t page_start, uint64_t from, std::span<const char> bytes,
                  std::vector<std::pair<uint64_t, std::string>>& done);

  const uint64_t page_;
  const size_t max_pending_;
  mutable std::mutex mu_;                                  // guards pending_
  std::map<std::pair<uint64_t, uint64_t>, Page> pending_;  // (file, page start) -> page
};

}  // namespace lazycache::fs
