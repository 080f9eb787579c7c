// SPDX-License-Identifier: MIT
#include "tools/save_record.h"

#include <cstdlib>
#include <sstream>
#include <string_view>
#include <utility>

#include "fs/local_files.h"
#include "remote/store_url.h"
#include "tools/mount_state.h"
#include "tools/run_files.h"

namespace lazycache::cli {
namespace {

// Where a URL option's full value comes from again when the record holds it redacted.
constexpr std::pair<std::string_view, const char*> kSecretSources[] = {
    {"--store=", "LAZYCACHE_STORE"},
    {"--endpoint=", "AWS_ENDPOINT_URL"},
};

}  // namespace

std::string SaveRecord::to_text() const {
  std::ostringstream out;
  out << "path=" << path << "\nprimary_key=" << primary_key << "\nscope=" << scope << "\nexact_hit=" << (exact_hit ? 1 : 0)
      << "\npid=" << pid << "\nstate_dir=" << state_dir << "\ncache_dir=" << cache_dir << "\nxattrs="
      << (xattrs == format::XattrSet::kStored ? "stored"
          : xattrs == format::XattrSet::kNone ? "none"
                                              : "user")
      << "\n";
  if (!base_etag.empty()) out << "base_etag=" << base_etag << "\n";
  if (!base_member.empty()) out << "base_member=" << base_member << "\n";
  for (const auto& a : store_args) out << "store_arg=" << a << "\n";
  return out.str();
}

Result<SaveRecord> SaveRecord::parse(const std::string& text) {
  SaveRecord r;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "path") r.path = v;
    else if (k == "primary_key") r.primary_key = v;
    else if (k == "scope") r.scope = v;
    else if (k == "exact_hit") r.exact_hit = v == "1";
    else if (k == "pid") r.pid = static_cast<pid_t>(std::atol(v.c_str()));
    else if (k == "state_dir") r.state_dir = v;
    else if (k == "cache_dir") r.cache_dir = v;
    else if (k == "base_etag") r.base_etag = v;
    else if (k == "base_member") r.base_member = v;
    else if (k == "store_arg") r.store_args.push_back(v);
    else if (k == "xattrs")
      r.xattrs = v == "stored" ? format::XattrSet::kStored : v == "none" ? format::XattrSet::kNone : format::XattrSet::kUser;
  }
  if (r.path.empty() || r.primary_key.empty()) return Status(ErrorCode::kCorrupt, "save record without a path or key");
  return r;
}

format::XattrSet xattrs_to_keep(const format::Index& index) {
  for (format::EntryId id = 0; id < index.entry_count(); ++id) {
    if (index.entry(id).has_xattrs) return format::XattrSet::kStored;
  }
  return format::XattrSet::kUser;
}

std::string save_record_path(const std::string& mountpoint) {
  std::string name = mountpoint;
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  return run_dir() + "/save-" + name + ".info";
}

Status write_save_record(const SaveRecord& record) {
  LC_RETURN_IF_ERROR(make_run_dir());
  return write_run_file(save_record_path(record.path), record.to_text());
}

Result<SaveRecord> read_save_record(const std::string& mountpoint) {
  const std::string file = save_record_path(mountpoint);
  auto text = fs::read_whole_file(file, 1 << 20);
  if (!text.ok()) return Status(ErrorCode::kNotFound, "no record of how " + mountpoint + " was mounted (" + file + ")");
  LC_ASSIGN_OR_RETURN(SaveRecord record, SaveRecord::parse(*text));
  restore_store_secrets(record);
  return record;
}

std::vector<std::string> recorded_store_args(const ArgParser& args) {
  std::vector<std::string> out;
  for (const char* name : {"store", "endpoint", "region", "concurrency", "part-size", "retries"}) {
    if (args.has(name)) out.push_back(std::string("--") + name + "=" + args.get(name));
  }
  // mount's --memory-budget is its frame memory; its save uploads within --upload-budget.
  if (args.has("upload-budget")) out.push_back("--memory-budget=" + args.get("upload-budget"));
  for (const char* name : {"path-style", "virtual-hosted", "sign-payload"}) {
    if (args.has(name)) out.push_back(std::string("--") + name);
  }
  if (!args.has("store")) {
    if (const char* env = std::getenv("LAZYCACHE_STORE"); env != nullptr && *env != 0) out.push_back(std::string("--store=") + env);
  }
  // The record is a file: a password or signature in a URL never goes into it.
  for (std::string& a : out) a = remote::redact_url(a);
  return out;
}

void restore_store_secrets(SaveRecord& record) {
  for (std::string& arg : record.store_args) {
    for (const auto& [option, env_name] : kSecretSources) {
      const char* env = std::getenv(env_name);
      if (env == nullptr || *env == 0 || arg.rfind(option, 0) != 0) continue;
      // Only the same URL: the environment may name another store by now.
      if (arg.substr(option.size()) == remote::redact_url(env)) arg = std::string(option) + env;
    }
  }
}

}  // namespace lazycache::cli
