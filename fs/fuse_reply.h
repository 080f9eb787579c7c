// SPDX-License-Identifier: MIT
// File: fs/fuse_reply.h -- reply helpers shared by the read-only and the writable op tables
// (fs/fuse_adapter.cpp, fs/overlay_fuse.cpp). Include only from those two files: it pulls in
// fuse_lowlevel.h. Every helper sends exactly one reply.
#pragma once

#include <fuse_lowlevel.h>
#include <sys/uio.h>

#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "fs/errno_map.h"
#include "fs/filesystem.h"

namespace lazycache::fs::fuse_reply {

// The per-op catch-all: an exception never crosses into libfuse, and the request still gets
// exactly one reply. Handlers reply themselves on every normal path.
template <typename F>
void guarded(fuse_req_t req, F&& body) {
  try {
    body();
  } catch (const std::bad_alloc&) {
    fuse_reply_err(req, ENOMEM);
  } catch (const std::exception& e) {
    std::cerr << "lazycache: internal error in a FUSE handler: " << e.what() << "\n";
    fuse_reply_err(req, EIO);
  }
}

inline void reply_error(fuse_req_t req, const Status& s) { fuse_reply_err(req, errno_for(s)); }

// getxattr: `size` 0 asks for the length; ENODATA when absent; ERANGE when it does not fit.
inline void reply_xattr_value(fuse_req_t req, size_t size, const std::optional<std::string>& value) {
  if (!value) return void(fuse_reply_err(req, ENODATA));
  if (size == 0) return void(fuse_reply_xattr(req, value->size()));
  if (value->size() > size) return void(fuse_reply_err(req, ERANGE));
  fuse_reply_buf(req, value->data(), value->size());
}

// listxattr: the names, each NUL-terminated, with the same size rules.
inline void reply_xattr_names(fuse_req_t req, size_t size, const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& n : names) list.append(n).push_back('\0');
  if (size == 0) return void(fuse_reply_xattr(req, list.size()));
  if (list.size() > size) return void(fuse_reply_err(req, ERANGE));
  fuse_reply_buf(req, list.data(), list.size());
}

// A read's pieces as one iovec reply; fuse_reply_iov copies into the kernel before returning,
// so the pieces may go right after.
inline void reply_pieces(fuse_req_t req, const Result<std::vector<ReadPiece>>& r) {
  if (!r.ok()) return reply_error(req, r.error());
  std::vector<iovec> iov;
  iov.reserve(r->size());
  for (const ReadPiece& p : *r) iov.push_back(iovec{const_cast<char*>(p.frame->data() + p.offset), p.length});
  fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size()));
}

}  // namespace lazycache::fs::fuse_reply
