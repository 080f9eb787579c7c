// SPDX-License-Identifier: MIT
// File: fs/local_files.h -- the file helpers of fs/ (chunk blobs, state files): they live in
// common/posix_files.h now; these names keep fs::make_dirs etc. working for existing callers.
#pragma once

#include "common/posix_files.h"

namespace lazycache::fs {

using ::lazycache::list_dir;
using ::lazycache::make_dirs;
using ::lazycache::read_whole_file;
using ::lazycache::real_path;
using ::lazycache::replace_file;
using ::lazycache::write_new_file;

}  // namespace lazycache::fs
