// SPDX-License-Identifier: MIT
// File: tools/config_file.h -- the default settings file, /etc/lazycache/config.
//
// Runners are set up once (an image, an Ansible role) while workflows change daily, so the store
// URL, region and endpoint can be written once per machine instead of into every job. The file
// holds KEY=VALUE lines with the same names as the environment variables (LAZYCACHE_STORE, ...);
// the environment always wins, so a job can still override any of them. Credentials are refused
// in this file: it is world-readable, and the AWS credential chain has its own files.
//
// Syntax: one KEY=VALUE per line; blank lines and lines starting with '#' are ignored; the value
// runs to the end of the line (surrounding spaces trimmed, one pair of matching quotes removed).
// Allowed keys: LAZYCACHE_* and AWS_REGION, AWS_DEFAULT_REGION, AWS_PROFILE, AWS_ENDPOINT_URL,
// AWS_ENDPOINT_URL_S3. LAZYCACHE_CONFIG names another file; an empty LAZYCACHE_CONFIG skips it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace lazycache::cli {

inline constexpr const char* kDefaultConfigPath = "/etc/lazycache/config";

// Parses `text` (the contents of `path`, used in messages). Errors (kInvalidArgument) name
// "path:line" and what is wrong; nothing is applied when any line is bad.
Result<std::vector<std::pair<std::string, std::string>>> parse_config(const std::string& text, const std::string& path);

// Reads the file named by LAZYCACHE_CONFIG (default kDefaultConfigPath) and sets each key that
// is not already in the environment. A missing default file is not an error; a missing file
// named explicitly is (kNotFound). Call once, before any thread starts (setenv is not thread-safe).
Status apply_default_config();

}  // namespace lazycache::cli
