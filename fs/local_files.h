// SPDX-License-Identifier: MIT
// File: fs/local_files.h -- small local-file helpers for fs/ (chunk blobs, state files).
// All blocking; thread-safe (no shared state). Errors carry the path and errno (kIo, kNotFound,
// kPermissionDenied).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace lazycache::fs {

// mkdir -p with mode 0755.
Status make_dirs(const std::string& path);
Result<std::string> real_path(const std::string& path);
// The whole file, refusing files larger than max_bytes (kCorrupt).
Result<std::string> read_whole_file(const std::string& path, size_t max_bytes);
// Creates `path` (which must not exist) with `mode` (less the umask) and writes `bytes`; on
// failure removes what it wrote.
Status write_new_file(const std::string& path, std::span<const std::byte> bytes, mode_t mode = 0644);
// Writes PATH.tmp.<pid> (created with `mode`) and renames it over `path`: readers see the old
// or the new content, and the file never has a wider mode than `mode`.
Status replace_file(const std::string& path, const std::string& content, mode_t mode = 0644);
// Names in a directory except "." and ".."; empty if it cannot be read.
std::vector<std::string> list_dir(const std::string& path);

}  // namespace lazycache::fs
