// SPDX-License-Identifier: MIT
// File: fs/errno_map.h -- the single place an ErrorCode becomes an errno for a FUSE reply.
#pragma once

#include "common/status.h"

namespace lazycache::fs {

// Returns the positive errno the kernel should see for `status` (0 for ok). kIo keeps the errno
// the status carries; remote failures that survived retries (kUnavailable, kTimeout) and bad bytes
// (kCorrupt) are EIO, a changed archive is ESTALE. Pure and thread-safe.
int errno_for(const Status& status);
int errno_for(ErrorCode code);

}  // namespace lazycache::fs
