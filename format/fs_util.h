// SPDX-License-Identifier: MIT
// File: format/fs_util.h -- small POSIX helpers for the writer and the extractor: path walks
// that open one component at a time with O_NOFOLLOW (so paths longer than PATH_MAX work, and a
// symlink on the way is never followed).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/posix_files.h"
#include "common/status.h"

namespace lazycache::format {

// The owning descriptor of common/posix_files.h, by its older name here.
using Fd = ::lazycache::UniqueFd;

// Splits "a//b/./c/" into {"a","b","c"}; ".." is kept (callers reject it).
std::vector<std::string> split_path(std::string_view path);

// Extraction's temporaries: ".lazycache-tmp.PID.N" (PID: the writer's process id, N a counter,
// both decimal). The writer renames or removes its own; one killed -9 leaves one behind. Extract
// removes those of dead writers (a live PID may be another extract at work), pack never saves them.
std::string extract_temporary_name(uint64_t counter);
// The writer's PID when `name` has exactly that form, else 0.
long extract_temporary_pid(std::string_view name);

// Opens directory `comps` below the directory `base_fd`, one component at a time with
// O_NOFOLLOW | O_DIRECTORY. With `create`, missing components are made with mode 0755 (in
// `created`, when given, the number of components that were made).
// `what` names the path in errors. Errors: kNotFound, kPermissionDenied (a symlink or a
// non-directory on the way), kIo.
Result<Fd> open_dir_below(int base_fd, const std::vector<std::string>& comps, bool create, const std::string& what);

// Opens an existing directory by path (absolute or relative to the cwd), following symlinks
// only in `path` itself, as the user gave it.
Result<Fd> open_dir_path(const std::string& path, bool create_parents);

}  // namespace lazycache::format
