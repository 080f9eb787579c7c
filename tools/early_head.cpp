// SPDX-License-Identifier: MIT
#include "tools/early_head.h"

#include <limits>
#include <vector>

#include "common/byte_source.h"

namespace lazycache::cli {
namespace {

// The object by name, of a size not known yet: ranged GETs, unpinned. A read past its end is
// short (the store's get_range) or an error; ArchiveHead records either as the piece's failure.
class UnsizedObjectSource : public ByteSource {
 public:
  UnsizedObjectSource(std::shared_ptr<remote::ObjectStore> store, std::string key) : store_(std::move(store)), key_(std::move(key)) {}
  uint64_t size() const override { return std::numeric_limits<uint64_t>::max(); }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override {
    if (out.empty()) return size_t{0};
    return store_->get_range(remote::RangeRequest{key_, offset, out.size(), ""}, out);
  }
  std::string describe() const override { return store_->describe() + "/" + key_ + " (read before its lookup answered)"; }

 private:
  const std::shared_ptr<remote::ObjectStore> store_;
  const std::string key_;
};

}  // namespace

std::shared_ptr<format::ArchiveHead> start_early_head(std::shared_ptr<remote::ObjectStore> store, const std::string& object_key) {
  const std::vector<uint64_t> pieces(kEarlyHeadPieces, kEarlyHeadPieceBytes);
  return std::make_shared<format::ArchiveHead>(std::make_shared<UnsizedObjectSource>(std::move(store), object_key), pieces);
}

}  // namespace lazycache::cli
