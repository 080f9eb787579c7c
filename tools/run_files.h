// SPDX-License-Identifier: MIT
// File: tools/run_files.h -- writing into the run directory (run_dir(), tools/mount_state.h).
//
// The run directory holds the daemons' state files and logs, the access lists and the save
// records: they name stores, keys, mount points and paths the job read, so they are private to
// the user: the directory is 0700 and every file written into it 0600 (created so, never
// widened by the umask or a rename). Store URLs in them are redacted anyway (remote/store_url.h).
#pragma once

#include <sys/types.h>

#include <string>

#include "common/status.h"

namespace lazycache::cli {

constexpr mode_t kRunDirMode = 0700;
constexpr mode_t kRunFileMode = 0600;

// Creates run_dir() (its parents 0755, itself 0700), or narrows an existing one of ours to 0700.
// Errors: kIo naming the path; kPermissionDenied when it is not a directory of this user (under
// /tmp another user could have made it first), saying to set LAZYCACHE_RUN_DIR.
Status make_run_dir();

// replace_file() (common/posix_files.h) with kRunFileMode; the caller made the directory (make_run_dir()).
Status write_run_file(const std::string& path, const std::string& content);

}  // namespace lazycache::cli
