// SPDX-License-Identifier: MIT
// File: tools/mount_point_check.h -- whether a directory may be mounted over. Mounting over files
// hides them until unmount, and a job that then reads or saves the path sees the entry, not what
// it had: `mount` refuses (unless --allow-nonempty) and `restore --mode auto` extracts over such
// a directory instead, as actions/cache does.
#pragma once

#include <string>

#include "common/status.h"

namespace lazycache::cli {

// OK for a missing or empty directory. kPreconditionFailed for one with entries: the message
// names the path, how many entries, one of them, and what to do instead. kIo if unreadable.
Status require_empty_mountpoint(const std::string& path);

}  // namespace lazycache::cli
