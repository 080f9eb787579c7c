// SPDX-License-Identifier: MIT
// File: fs/overlay_listings.cpp -- the overlay's directory handles: the listing taken at opendir,
// kept until releasedir (or the overlay's end, for RELEASEDIRs still queued when a session ends).
#include <memory>
#include <mutex>

#include "fs/overlay.h"

namespace lazycache::fs {

Result<uint64_t> Overlay::open_dir(uint64_t ino) {
  LC_ASSIGN_OR_RETURN(auto entries, list(ino));
  auto listing = std::make_unique<const std::vector<DirEntryInfo>>(std::move(entries));
  std::lock_guard lock(listings_mu_);
  const uint64_t h = next_listing_++;
  listings_.emplace(h, std::move(listing));
  return h;
}

const std::vector<DirEntryInfo>* Overlay::listing(uint64_t dir_handle) const {
  std::lock_guard lock(listings_mu_);
  auto it = listings_.find(dir_handle);
  return it == listings_.end() ? nullptr : it->second.get();
}

void Overlay::release_dir(uint64_t dir_handle) {
  std::unique_ptr<const std::vector<DirEntryInfo>> gone;  // freed after the lock is dropped
  std::lock_guard lock(listings_mu_);
  auto it = listings_.find(dir_handle);
  if (it == listings_.end()) return;
  gone = std::move(it->second);
  listings_.erase(it);
}

}  // namespace lazycache::fs
