// SPDX-License-Identifier: MIT
#include "format/quote.h"

#include "common/quote.h"

namespace lazycache::format {

std::string quote_path(std::string_view path, size_t max_bytes) { return quote_text(path, max_bytes); }

std::string quote_path_if_needed(std::string_view path, size_t max_bytes) { return quote_text_if_needed(path, max_bytes); }

}  // namespace lazycache::format
