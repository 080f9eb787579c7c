// SPDX-License-Identifier: MIT
// File: format/quote.h -- quote_path(): an archive path or name as it appears in any output
// (ls, info, extract warnings, the mount log, error messages): in single quotes, with control
// bytes, DEL, backslash and quote escaped (\n, \t, \xNN, \\, \'), so a hostile name can neither
// hide in nor rewrite the terminal it is printed to. Paths over `max_bytes` keep their head and
// tail around "...". The escaping itself is common/quote.h's quote_text(). Pure; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lazycache::format {

std::string quote_path(std::string_view path, size_t max_bytes = 1024);
// `path` as it is when quote_path() would escape nothing in it, else quote_path(path): for
// listings (ls, info), where ordinary names stay byte-identical for scripts.
std::string quote_path_if_needed(std::string_view path, size_t max_bytes = 1024);

}  // namespace lazycache::format
