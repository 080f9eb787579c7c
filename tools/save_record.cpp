// SPDX-License-Identifier: MIT
#include "tools/save_record.h"

#include <cstdlib>
#include <sstream>

#include "common/posix_files.h"
#include "remote/store_url.h"
#include "tools/mount_state.h"
#include "tools/run_files.h"

namespace lazycache::cli {
namespace {

constexpr int kRecordFormat = 2;

const char* xattrs_name(format::XattrSet x) {
  return x == format::XattrSet::kStored ? "stored" : x == format::XattrSet::kNone ? "none" : "user";
}

const char* addressing_name(StoreSettings::Addressing a) {
  return a == StoreSettings::Addressing::kPathStyle ? "path" : a == StoreSettings::Addressing::kVirtualHosted ? "virtual" : "auto";
}

Result<uint64_t> number(const std::string& name, const std::string& v) {
  if (v.empty() || v.size() > 20 || v.find_first_not_of("0123456789") != std::string::npos)
    return Status(ErrorCode::kCorrupt, "save record: " + name + "=" + v + " is not a number");
  return std::stoull(v);
}

// Format 1 kept the store options as argv strings: parse them as mount's command line did.
Result<StoreSettings> settings_from_store_args(const std::vector<std::string>& store_args) {
  ArgParser args("unmount", "", store_args);
  add_store_options(args);
  int code = 0;
  if (!args.parse(code)) return Status(ErrorCode::kCorrupt, "save record (format 1): the recorded store options no longer parse");
  return store_settings_from(args);
}

// One line of a format-2 record into `r` (unknown names are ignored: later lines).
Status apply_line(SaveRecord& r, const std::string& k, const std::string& v) {
  StoreSettings& st = r.store;
  if (k == "path") r.path = v;
  else if (k == "primary_key") r.primary_key = v;
  else if (k == "scope") r.scope = v;
  else if (k == "version") r.version = v;
  else if (k == "exact_hit") r.exact_hit = v == "1";
  else if (k == "pid") {
    LC_ASSIGN_OR_RETURN(uint64_t pid, number(k, v));
    r.pid = static_cast<pid_t>(pid);
  } else if (k == "state_dir") r.state_dir = v;
  else if (k == "cache_dir") r.cache_dir = v;
  else if (k == "base_etag") r.base_etag = v;
  else if (k == "base_member") r.base_member = v;
  else if (k == "base_object") r.base_object = v;
  else if (k == "base_size") {
    LC_ASSIGN_OR_RETURN(r.base_size, number(k, v));
  } else if (k == "base_tail") {
    LC_ASSIGN_OR_RETURN(r.base_tail, number(k, v));
  } else if (k == "base_tail_digest") {
    r.base_tail_digest = v;
  } else if (k == "xattrs")
    r.xattrs = v == "stored" ? format::XattrSet::kStored : v == "none" ? format::XattrSet::kNone : format::XattrSet::kUser;
  else if (k == "store") st.url = v;
  else if (k == "endpoint") st.endpoint = v;
  else if (k == "region") st.region = v;
  else if (k == "addressing")
    st.addressing = v == "path"      ? StoreSettings::Addressing::kPathStyle
                    : v == "virtual" ? StoreSettings::Addressing::kVirtualHosted
                                     : StoreSettings::Addressing::kAuto;
  else if (k == "sign_payload") st.sign_payload = v == "1";
  else if (k == "concurrency") {
    LC_ASSIGN_OR_RETURN(uint64_t n, number(k, v));
    st.transfer.concurrency = static_cast<int>(n);
  } else if (k == "part_size") {
    LC_ASSIGN_OR_RETURN(st.transfer.part_size_bytes, number(k, v));
  } else if (k == "memory_budget") {
    LC_ASSIGN_OR_RETURN(st.transfer.memory_budget_bytes, number(k, v));
  } else if (k == "retries") {
    LC_ASSIGN_OR_RETURN(uint64_t n, number(k, v));
    st.transfer.max_attempts = static_cast<int>(n);
  }
  return Status();
}

// Where a URL's full value comes from again when the record holds it redacted.
void restore_secret(std::string& url, const char* env_name) {
  const char* env = std::getenv(env_name);
  // Only the same URL: the environment may name another store by now.
  if (env != nullptr && *env != 0 && !url.empty() && url == remote::redact_url(env)) url = env;
}

}  // namespace

std::string store_settings_text(const StoreSettings& st) {
  std::ostringstream out;
  if (!st.url.empty()) out << "store=" << st.url << "\n";
  if (!st.endpoint.empty()) out << "endpoint=" << st.endpoint << "\n";
  if (!st.region.empty()) out << "region=" << st.region << "\n";
  out << "addressing=" << addressing_name(st.addressing) << "\nsign_payload=" << (st.sign_payload ? 1 : 0)
      << "\nconcurrency=" << st.transfer.concurrency << "\npart_size=" << st.transfer.part_size_bytes
      << "\nmemory_budget=" << st.transfer.memory_budget_bytes << "\nretries=" << st.transfer.max_attempts << "\n";
  return out.str();
}

std::string SaveRecord::to_text() const {
  std::ostringstream out;
  out << "format=" << kRecordFormat << "\npath=" << path << "\nprimary_key=" << primary_key << "\n";
  if (!scope.empty()) out << "scope=" << scope << "\n";
  if (!version.empty()) out << "version=" << version << "\n";
  out << "exact_hit=" << (exact_hit ? 1 : 0) << "\npid=" << pid << "\n";
  if (!state_dir.empty()) out << "state_dir=" << state_dir << "\n";
  if (!cache_dir.empty()) out << "cache_dir=" << cache_dir << "\n";
  out << "xattrs=" << xattrs_name(xattrs) << "\n";
  if (!base_etag.empty()) out << "base_etag=" << base_etag << "\n";
  if (!base_member.empty()) out << "base_member=" << base_member << "\n";
  if (!base_object.empty()) out << "base_object=" << base_object << "\n";
  if (base_size > 0) out << "base_size=" << base_size << "\nbase_tail=" << base_tail << "\n";
  if (!base_tail_digest.empty()) out << "base_tail_digest=" << base_tail_digest << "\n";
  out << store_settings_text(store);
  return out.str();
}

Result<SaveRecord> SaveRecord::parse(const std::string& text) {
  SaveRecord r;
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> store_args;  // format 1
  bool format2 = false;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "format") {
      LC_ASSIGN_OR_RETURN(uint64_t f, number(k, v));
      if (f != static_cast<uint64_t>(kRecordFormat))
        return Status(ErrorCode::kUnsupported, "save record format " + v + " (this lazycache reads 1 and 2)");
      format2 = true;
    } else if (k == "store_arg") {
      store_args.push_back(v);
    } else {
      LC_RETURN_IF_ERROR(apply_line(r, k, v));
    }
  }
  if (!format2) {
    LC_ASSIGN_OR_RETURN(r.store, settings_from_store_args(store_args));
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
  auto text = read_whole_file(file, 1 << 20);
  if (!text.ok()) return Status(ErrorCode::kNotFound, "no record of how " + mountpoint + " was mounted (" + file + ")");
  LC_ASSIGN_OR_RETURN(SaveRecord record, SaveRecord::parse(*text));
  restore_store_secrets(record);
  return record;
}

Result<StoreSettings> recorded_store_settings(const ArgParser& args, StoreUse use) {
  LC_ASSIGN_OR_RETURN(StoreSettings st, store_settings_from(args));
  // mount's --memory-budget is its frame memory; its save uploads within --upload-budget.
  if (use == StoreUse::kMount) {
    LC_ASSIGN_OR_RETURN(st.transfer.memory_budget_bytes, args.get_size("upload-budget"));
  }
  return settings_for_record(std::move(st));
}

StoreSettings settings_for_record(StoreSettings st) {
  if (st.url.empty()) {
    if (const char* env = std::getenv("LAZYCACHE_STORE"); env != nullptr && *env != 0) st.url = env;
  }
  // The record is a file: a password or signature in a URL never goes into it.
  st.url = remote::redact_url(st.url);
  st.endpoint = remote::redact_url(st.endpoint);
  return st;
}

void restore_store_secrets(SaveRecord& record) {
  restore_secret(record.store.url, "LAZYCACHE_STORE");
  restore_secret(record.store.endpoint, "AWS_ENDPOINT_URL");
}

}  // namespace lazycache::cli
