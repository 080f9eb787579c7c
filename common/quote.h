// SPDX-License-Identifier: MIT
// File: common/quote.h -- quote_text(): untrusted text (an archive name, a server's error
// message, a response header) as it may appear in a message: in single quotes, with control
// bytes, DEL, the C1 controls in their UTF-8 form (U+0080..U+009F: U+009B is a CSI to some
// terminals), backslash and quote escaped (\n, \t, \xNN, \\, \'), so it can neither hide in
// nor rewrite the terminal or log it is printed to, and stays on one line. Text over
// `max_bytes` keeps its head and tail around "...". Here in common/ because format/ (names)
// and remote/ (server text) both need it and know nothing of each other. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lazycache {

std::string quote_text(std::string_view text, size_t max_bytes = 1024);
// `text` as it is when quote_text() would escape nothing in it, else quote_text(text, max_bytes):
// for listings (ls, info, mount's "mounted ... at ..."), whose ordinary names must stay
// byte-identical for the scripts that read them.
std::string quote_text_if_needed(std::string_view text, size_t max_bytes = 1024);

}  // namespace lazycache
