// SPDX-License-Identifier: MIT
#include "tools/config_file.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace lazycache::cli {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool valid_name(const std::string& k) {
  if (k.empty() || (k[0] >= '0' && k[0] <= '9')) return false;
  for (char c : k)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

bool allowed_key(const std::string& k) {
  static const char* const kAws[] = {"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"};
  if (k.rfind("LAZYCACHE_", 0) == 0) return k != "LAZYCACHE_CONFIG";
  for (const char* a : kAws)
    if (k == a) return true;
  return false;
}

}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> parse_config(const std::string& text, const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    std::string where = path + ":" + std::to_string(n) + ": ";
    size_t eq = t.find('=');
    if (eq == std::string::npos) return Status(ErrorCode::kInvalidArgument, where + "expected KEY=VALUE");
    std::string key = trim(t.substr(0, eq));
    std::string value = trim(t.substr(eq + 1));
    if (key.rfind("export ", 0) == 0) key = trim(key.substr(7));
    if (!valid_name(key)) return Status(ErrorCode::kInvalidArgument, where + "'" + key + "' is not a variable name");
    if (key.find("SECRET") != std::string::npos || key.find("TOKEN") != std::string::npos || key == "AWS_ACCESS_KEY_ID") {
      return Status(ErrorCode::kInvalidArgument, where + key +
                                                     ": credentials do not belong in this world-readable file; use the environment "
                                                     "or ~/.aws/credentials");
    }
    if (!allowed_key(key)) {
      return Status(ErrorCode::kInvalidArgument, where + "unknown setting " + key +
                                                     " (allowed: LAZYCACHE_*, AWS_REGION, AWS_DEFAULT_REGION, "
                                                     "AWS_PROFILE, AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3)");
    }
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

Status apply_default_config() {
  const char* env = std::getenv("LAZYCACHE_CONFIG");
  bool explicit_path = env != nullptr;
  std::string path = explicit_path ? env : kDefaultConfigPath;
  if (path.empty()) return Status();
  std::ifstream in(path);
  if (!in) {
    int err = errno;
    if (!explicit_path && err == ENOENT) return Status();
    return errno_status("reading settings file " + path + (explicit_path ? " (LAZYCACHE_CONFIG)" : ""), err);
  }
  std::stringstream text;
  text << in.rdbuf();
  LC_ASSIGN_OR_RETURN(auto settings, parse_config(text.str(), path));
  for (const auto& [key, value] : settings) {
    if (setenv(key.c_str(), value.c_str(), /*overwrite=*/0) != 0) return errno_status("setenv " + key);
  }
  return Status();
}

}  // namespace lazycache::cli
