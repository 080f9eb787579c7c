// SPDX-License-Identifier: MIT
#include "remote/aws_config.h"

#include <cstdlib>
#include <fstream>
#include <map>

namespace lazycache::remote {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

std::string home_file(const char* var, const char* relative) {
  if (std::string v = env(var); !v.empty()) return v;
  std::string home = env("HOME");
  return home.empty() ? "" : home + "/" + relative;
}

std::string profile_name() {
  std::string p = env("AWS_PROFILE");
  return p.empty() ? "default" : p;
}

// The key=value pairs of one INI section ("" when the file or section is missing).
std::map<std::string, std::string> ini_section(const std::string& path, const std::string& section) {
  std::map<std::string, std::string> out;
  if (path.empty()) return out;
  std::ifstream in(path);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      inside = trim(line.substr(1, line.size() - 2)) == section;
      continue;
    }
    auto eq = line.find('=');
    if (inside && eq != std::string::npos) out[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return out;
}

std::map<std::string, std::string> config_profile() {
  std::string name = profile_name();
  return ini_section(home_file("AWS_CONFIG_FILE", ".aws/config"), name == "default" ? "default" : "profile " + name);
}

}  // namespace

Result<AwsCredentials> load_aws_credentials() {
  AwsCredentials c{env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"), env("AWS_SESSION_TOKEN")};
  if (!c.empty()) return c;
  std::string cred_file = home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
  for (const auto& section : {ini_section(cred_file, profile_name()), config_profile()}) {
    auto get = [&](const char* k) {
      auto it = section.find(k);
      return it == section.end() ? std::string() : it->second;
    };
    c = AwsCredentials{get("aws_access_key_id"), get("aws_secret_access_key"), get("aws_session_token")};
    if (!c.empty()) return c;
  }
  return Status(ErrorCode::kPermissionDenied, "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or profile '" +
                                                  profile_name() + "' in " +
                                                  (cred_file.empty() ? std::string("~/.aws/credentials") : cred_file));
}

std::string aws_region() {
  for (const char* v : {"AWS_REGION", "AWS_DEFAULT_REGION"})
    if (std::string r = env(v); !r.empty()) return r;
  auto profile = config_profile();
  if (auto it = profile.find("region"); it != profile.end() && !it->second.empty()) return it->second;
  return "us-east-1";
}

std::string aws_endpoint_url() {
  for (const char* v : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"})
    if (std::string e = env(v); !e.empty()) return e;
  auto profile = config_profile();
  if (auto it = profile.find("endpoint_url"); it != profile.end()) return it->second;
  return "";
}

std::shared_ptr<CredentialSource> CredentialSource::fixed(AwsCredentials creds) {
  return std::make_shared<CredentialSource>([creds] { return Result<AwsCredentials>(creds); });
}

Result<AwsCredentials> CredentialSource::current() {
  std::lock_guard lock(mu_);
  if (!loaded_) {
    LC_ASSIGN_OR_RETURN(cached_, loader_());
    loaded_ = true;
  }
  return cached_;
}

bool CredentialSource::reload() {
  auto fresh = loader_();
  if (!fresh.ok()) return false;
  std::lock_guard lock(mu_);
  bool changed = !loaded_ || fresh->access_key_id != cached_.access_key_id || fresh->secret_access_key != cached_.secret_access_key ||
                 fresh->session_token != cached_.session_token;
  cached_ = *fresh;
  loaded_ = true;
  return changed;
}

}  // namespace lazycache::remote
