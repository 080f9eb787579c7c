// SPDX-License-Identifier: MIT
// File: remote/local_dir_object_store.h -- LocalDirObjectStore: objects are files under a
// directory (the embedded default store, file:///dir or a plain path).
//
// Same semantics as S3:
//  - put writes DIR/.lazycache-tmp/<pid>.<n>.<host> and publishes it with rename(2) (replace)
//    or link(2) (create_only: fails atomically with EEXIST -> kAlreadyExists), so readers never
//    see a partial object and a failed put leaves nothing behind. Keys under .lazycache-tmp/ are
//    reserved: head/get_range answer kNotFound, put/remove kInvalidArgument, list skips them.
//  - A writer killed mid-put (kill -9) leaves its temporary; every put first removes those of
//    dead writers (remove_stale_temporaries).
//  - The ETag is derived from (inode, size, mtime ns) of the published file; a replaced object
//    is a new inode, so a read pinned to the old ETag gets kPreconditionFailed.
//  - Keys with '/' become subdirectories; list walks them in key order, 1000 keys per page,
//    the continuation being the last key returned (S3's start-after).
// Thread-safe; many processes may share one directory.
#pragma once

#include <memory>
#include <string>

#include "remote/object_store.h"

namespace lazycache::remote {

class LocalDirObjectStore final : public ObjectStore {
 public:
  // Creates the directory (and parents) if missing. Errors: kIo, kPermissionDenied.
  static Result<std::shared_ptr<LocalDirObjectStore>> open(const std::string& dir);

  Result<ObjectInfo> head(std::string_view key) override;
  Result<size_t> get_range(const RangeRequest& req, std::span<std::byte> out) override;
  Result<ObjectInfo> put(std::string_view key, const BodyReader& body, const PutOptions& opts) override;
  Result<ListPage> list(std::string_view prefix, std::string_view continuation) override;
  Status remove(std::string_view key) override;
  // Sets the file's access time to now (utimensat; the mtime, and so the ETag, stay): an explicit
  // write, so it works on noatime/relatime mounts too. list() and head() report it as
  // last_access_s.
  Status record_access(std::string_view key) override;
  std::string describe() const override { return "file://" + dir_; }
  // Parts go to a temporary in order; copied parts are copy_file_range(2) from the source file.
  Result<std::unique_ptr<MultipartUpload>> start_upload(std::string_view key, const PutOptions& opts) override;

  // Removes temporaries left by killed writers: those whose writer pid (same host) no longer
  // exists, and any untouched for an hour (another host's, or a pid since reused; a live
  // writer touches its file with every write). Returns how many it removed; best effort (a
  // directory it cannot read counts as none). Called by every put.
  size_t remove_stale_temporaries();

  // Page size of list(); tests lower it to exercise paging.
  void set_list_page_size(size_t n) { page_size_ = n == 0 ? 1 : n; }
  const std::string& dir() const { return dir_; }

 private:
  friend class LocalDirUpload;
  explicit LocalDirObjectStore(std::string dir) : dir_(std::move(dir)) {}
  // DIR/.lazycache-tmp/<pid>.<n>.<host>, after removing those of dead writers.
  std::string new_temporary_path();
  // Checks the key (kAlreadyExists when create_only and it exists), then creates a new
  // temporary (*tmp) for its bytes and returns its descriptor (the caller closes and unlinks).
  Result<int> create_temporary(std::string_view key, bool create_only, std::string* tmp);
  // fsyncs the temporary `fd` and publishes it as key (link(2) when create_only, else rename(2)).
  Result<ObjectInfo> publish(int fd, const std::string& tmp, std::string_view key, bool create_only);
  std::string path_of(std::string_view key) const { return dir_ + "/" + std::string(key); }
  std::string dir_;
  size_t page_size_ = 1000;
};

}  // namespace lazycache::remote
