// SPDX-License-Identifier: MIT
#include "tools/store_options.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "format/archive.h"
#include "format/quote.h"
#include "remote/aws_config.h"
#include "remote/http_object_store.h"
#include "remote/local_dir_object_store.h"
#include "remote/object_byte_source.h"
#include "remote/retrying_object_store.h"
#include "remote/s3_object_store.h"
#include "remote/store_url.h"

namespace lazycache::cli {

void add_store_options(ArgParser& args, StoreUse use) {
  // The help names both defaults rather than this user's: the man page is generated from it (as
  // root, at build time) and must be true for every user.
  args.option("store", "URL",
              "store: DIR, file:///DIR, s3://BUCKET/PREFIX or http(s)://BASE (default: $LAZYCACHE_STORE, else "
              "~/.cache/lazycache/store, /var/cache/lazycache/store as root)");
  args.option("endpoint", "URL", "S3 endpoint, e.g. http://127.0.0.1:9000 (default: $AWS_ENDPOINT_URL, else AWS)");
  args.option("region", "REGION", "S3 region (default: $AWS_REGION, the profile's region, else us-east-1)");
  args.flag("path-style", "S3 path-style addressing (default with --endpoint)");
  args.flag("virtual-hosted", "S3 virtual-hosted addressing (default on AWS)");
  args.flag("sign-payload", "sign upload bodies with their SHA-256 instead of UNSIGNED-PAYLOAD");
  args.option("concurrency", "N|auto", "simultaneous requests per transfer", "auto");
  args.option("part-size", "SIZE|auto", "multipart part size (5M..5G)", "auto");
  // A mount's --memory-budget is its frame memory; what its later unmount --save uploads with is
  // --upload-budget (issue 18 item 11: one flag described as the other).
  if (use == StoreUse::kMount) {
    // auto (issue 15 item 5): a sixteenth of the archive's tar stream, 32-256 MiB
    // (fs/memory_budget.h); figures: docs/mount.md, Memory.
    args.option("memory-budget", "SIZE|auto",
                "decompressed frames in memory plus fetches and fill in flight (auto: a sixteenth of the archive's "
                "uncompressed size, 32M to 256M)",
                "auto");
    args.option("upload-budget", "SIZE", "what this mount's unmount --save uploads with: (concurrency + 1) x part size within it", "256M");
  } else {
    args.option("memory-budget", "SIZE",
                "memory budget: uploads keep (concurrency + 1) x part size within it; a restore --extract holds at "
                "most this much compressed plus decoded data",
                "256M");
  }
  if (use == StoreUse::kRead) {
    // Accepted (scripts pass one set of store options to every command) but not offered.
    for (const char* name : {"sign-payload", "concurrency", "part-size", "memory-budget"}) args.hide(name);
  }
  args.option("retries", "N", "attempts per request on transient errors (5xx, 429, resets, stalls)", "5");
}

void add_key_options(ArgParser& args, bool with_restore_keys) {
  args.option("key", "KEY", "the primary cache key");
  if (with_restore_keys) args.multi("restore-keys", "PREFIX", "ordered key prefixes tried when --key misses (newline-separated lists too)");
  args.option("scope", "SCOPE", "namespace for entries, e.g. repository and branch", "");
  if (with_restore_keys)
    args.flag("any-paths", "take an entry of the key saved for other paths too (by default the paths are part of an entry's identity)");
}

std::string default_store_dir() {
  if (::geteuid() == 0) return "/var/cache/lazycache/store";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/') return std::string(xdg) + "/lazycache/store";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/lazycache/store";
}

Result<remote::TransferConfig> transfer_config_from(const ArgParser& args) {
  remote::TransferConfig config;
  if (std::string c = args.get("concurrency"); !c.empty() && c != "auto") {
    LC_ASSIGN_OR_RETURN(int64_t n, args.get_int("concurrency"));
    if (n < 1 || n > 256) return Status(ErrorCode::kInvalidArgument, "--concurrency: expected 1..256 or auto");
    config.concurrency = static_cast<int>(n);
  }
  if (std::string p = args.get("part-size"); !p.empty() && p != "auto") {
    LC_ASSIGN_OR_RETURN(uint64_t n, args.get_size("part-size"));
    // 1M..5G here: a restore's range reads may be smaller than S3's upload parts (the bench
    // sweep's 8 x 4 MiB); commands that upload add check_upload_part_size().
    if (n < kMinRangePartSize || n > remote::kMaxPartSize) return Status(ErrorCode::kInvalidArgument, "--part-size: expected 1M to 5G");
    config.part_size_bytes = n;
  }
  // A mount's `auto` is its frame memory (tools/mount_options.h), not a transfer budget.
  if (const std::string m = args.get("memory-budget"); !m.empty() && m != "auto") {
    LC_ASSIGN_OR_RETURN(config.memory_budget_bytes, args.get_size("memory-budget"));
  }
  if (!args.get("retries").empty()) {
    LC_ASSIGN_OR_RETURN(int64_t n, args.get_int("retries"));
    if (n < 1 || n > 100) return Status(ErrorCode::kInvalidArgument, "--retries: expected 1..100");
    config.max_attempts = static_cast<int>(n);
  }
  return config;
}

Status check_upload_part_size(const remote::TransferConfig& config) {
  if (config.part_size_bytes != 0 && config.part_size_bytes < remote::kMinPartSize)
    return Status(ErrorCode::kInvalidArgument, "--part-size: S3 upload parts are 5M to 5G (restores may read smaller ranges)");
  return Status();
}

namespace {

// Every retry, on stderr: a store that keeps failing is never a silent wait.
void print_retry(const std::string& line) {
  std::string text = "lazycache: " + remote::redact_url(line) + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
}

Result<std::shared_ptr<remote::ObjectStore>> open_s3_store(const remote::StoreUrl& url, const StoreSettings& settings) {
  remote::S3Config config;
  config.bucket = url.bucket;
  config.prefix = url.prefix;
  config.region = settings.region.empty() ? remote::aws_region() : settings.region;
  std::string endpoint = settings.endpoint.empty() ? remote::aws_endpoint_url() : settings.endpoint;
  bool custom_endpoint = !endpoint.empty();
  if (!custom_endpoint) endpoint = "https://s3." + config.region + ".amazonaws.com";
  LC_ASSIGN_OR_RETURN(config.endpoint, remote::parse_endpoint(endpoint));
  // AWS prefers virtual-hosted; self-hosted endpoints (MinIO, Swift, s3rver) rarely have the
  // wildcard DNS it needs, and bucket names with dots break TLS wildcards, so path-style there.
  using Addressing = StoreSettings::Addressing;
  config.path_style = settings.addressing == Addressing::kPathStyle ||
                      (settings.addressing == Addressing::kAuto && (custom_endpoint || url.bucket.find('.') != std::string::npos));
  config.sign_payload = settings.sign_payload;
  config.transfer = settings.transfer;
  config.part_retry.max_attempts = settings.transfer.max_attempts;
  config.part_retry.on_retry = print_retry;
  auto credentials = std::make_shared<remote::CredentialSource>(remote::load_aws_credentials);
  LC_RETURN_IF_ERROR(credentials->current().status().with_context(url.display()));
  return std::shared_ptr<remote::ObjectStore>(std::make_shared<remote::S3ObjectStore>(std::move(config), std::move(credentials)));
}

Result<std::shared_ptr<remote::ObjectStore>> open_concrete_store(const remote::StoreUrl& url, const StoreSettings& settings) {
  switch (url.kind) {
    case remote::StoreUrl::Kind::kLocalDir: {
      LC_ASSIGN_OR_RETURN(auto store, remote::LocalDirObjectStore::open(url.dir));
      return std::shared_ptr<remote::ObjectStore>(std::move(store));
    }
    case remote::StoreUrl::Kind::kS3: return open_s3_store(url, settings);
    case remote::StoreUrl::Kind::kHttp:
      return std::shared_ptr<remote::ObjectStore>(
          std::make_shared<remote::HttpObjectStore>(url.http_base, url.http_query, settings.transfer));
  }
  return Status(ErrorCode::kInternal, "unknown store kind");
}

}  // namespace

Result<StoreSettings> store_settings_from(const ArgParser& args) {
  StoreSettings settings;
  settings.url = args.get("store");
  settings.endpoint = args.get("endpoint");
  settings.region = args.get("region");
  if (args.has("path-style") && args.has("virtual-hosted"))
    return Status(ErrorCode::kInvalidArgument, "--path-style and --virtual-hosted exclude each other");
  if (args.has("path-style")) settings.addressing = StoreSettings::Addressing::kPathStyle;
  if (args.has("virtual-hosted")) settings.addressing = StoreSettings::Addressing::kVirtualHosted;
  settings.sign_payload = args.has("sign-payload");
  LC_ASSIGN_OR_RETURN(settings.transfer, transfer_config_from(args));
  return settings;
}

std::string store_url_of(const StoreSettings& settings) {
  if (!settings.url.empty()) return settings.url;
  if (const char* env = std::getenv("LAZYCACHE_STORE"); env && *env) return env;
  return default_store_dir();
}

std::string store_url_from(const ArgParser& args) {
  StoreSettings settings;
  settings.url = args.get("store");
  return store_url_of(settings);
}

Result<std::shared_ptr<remote::ObjectStore>> open_store(const StoreSettings& settings, int max_attempts) {
  LC_ASSIGN_OR_RETURN(auto url, remote::parse_store_url(store_url_of(settings)));
  StoreSettings effective = settings;
  if (max_attempts > 0) effective.transfer.max_attempts = max_attempts;
  LC_ASSIGN_OR_RETURN(auto store, open_concrete_store(url, effective));
  remote::RetryConfig retry;
  retry.max_attempts = effective.transfer.max_attempts;
  retry.on_retry = print_retry;
  return std::shared_ptr<remote::ObjectStore>(std::make_shared<remote::RetryingObjectStore>(std::move(store), retry));
}

Result<std::shared_ptr<remote::ObjectStore>> open_store(const ArgParser& args, int max_attempts) {
  LC_ASSIGN_OR_RETURN(auto settings, store_settings_from(args));
  return open_store(settings, max_attempts);
}

std::vector<std::string> restore_prefixes_from(const ArgParser& args) {
  std::vector<std::string> out;
  for (const auto& v : args.get_all("restore-keys")) {
    std::istringstream in(v);
    std::string line;
    while (std::getline(in, line)) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
      size_t start = line.find_first_not_of(" \t");
      if (start == std::string::npos) continue;
      out.push_back(line.substr(start));
    }
  }
  return out;
}

KeyOptions key_options_from(const ArgParser& args) {
  return KeyOptions{args.get("key"), args.get("scope"), restore_prefixes_from(args), args.has("any-paths")};
}

Result<std::string> primary_object_key(const ArgParser& args, const std::string& version) {
  std::string key = args.get("key");
  if (key.empty()) return Status(ErrorCode::kInvalidArgument, "--key is required");
  return remote::entry_object_key(args.get("scope"), key, version);
}

namespace {

// "/w/a, /w/b" for one entry: the saved paths its index records (one ranged GET of its tail).
std::string saved_paths_of(std::shared_ptr<remote::ObjectStore> store, const remote::KeyMatch& m) {
  auto reader = format::ArchiveReader::open(open_entry_source(std::move(store), m.object));
  if (!reader.ok()) return "(unreadable: " + reader.error().to_string() + ")";
  std::string out;
  for (const auto& r : (*reader)->index().roots()) out += (out.empty() ? "" : ", ") + format::quote_path_if_needed(r.original_path);
  return out;
}

std::string path_list(const std::vector<std::string>& paths) {
  std::string out;
  for (const auto& p : paths) out += (out.empty() ? "" : ", ") + format::quote_path_if_needed(p);
  return out;
}

}  // namespace

Result<ResolvedEntry> resolve_entry(std::shared_ptr<remote::ObjectStore> store, const ArgParser& args,
                                    const std::vector<std::string>& saved_paths, EntryUse use) {
  return resolve_entry(std::move(store), key_options_from(args), saved_paths, use);
}

Result<ResolvedEntry> resolve_entry(std::shared_ptr<remote::ObjectStore> store, const KeyOptions& key,
                                    const std::vector<std::string>& saved_paths, EntryUse use, uint64_t tail_bytes) {
  ResolvedEntry entry;
  entry.scope = key.scope;
  entry.primary_key = key.key;
  if (entry.primary_key.empty()) return Status(ErrorCode::kInvalidArgument, "--key is required");
  entry.restore_prefixes = key.restore_prefixes;
  entry.saved_paths = saved_paths;
  if (!saved_paths.empty() && !key.any_paths) entry.version = remote::entry_version(saved_paths);
  LC_ASSIGN_OR_RETURN(auto resolution,
                      remote::resolve_cache_key(*store, entry.scope, entry.primary_key, entry.restore_prefixes, entry.version, tail_bytes));
  entry.match = std::move(resolution.match);
  entry.tail = std::move(resolution.tail);
  if (!entry.match) {
    // Three are enough to say what happened; a key saved for many path sets is listed in `list`.
    constexpr size_t kShown = 3;
    const auto& others = resolution.other_versions;
    for (size_t i = 0; i < others.size() && i < kShown; ++i)
      entry.saved_for_other_paths += (i == 0 ? "" : "; ") + saved_paths_of(store, others[i]);
    if (others.size() > kShown) entry.saved_for_other_paths += "; and " + std::to_string(others.size() - kShown) + " more";
  }
  // The "last used" time that prune and the local store's bound evict by (best effort: a
  // read-only store directory must not fail a restore).
  if (entry.match && use == EntryUse::kUse)
    ignore_error(store->record_access(entry.match->object.key), "the use time is a hint for pruning");
  return entry;
}

std::string other_paths_message(const ResolvedEntry& entry, const std::string& store_description) {
  if (entry.match || entry.saved_for_other_paths.empty()) return "";
  return "no entry for key " + entry.primary_key + " with these paths (" + path_list(entry.saved_paths) + ") in " + store_description +
         "; saved for: " + entry.saved_for_other_paths + " (--any-paths takes it)";
}

std::shared_ptr<ByteSource> open_entry_source(std::shared_ptr<remote::ObjectStore> store, const remote::ObjectInfo& object) {
  return remote::ObjectByteSource::from_info(std::move(store), object);
}

Status print_key_outputs(const ResolvedEntry& entry, bool to_stdout) {
  std::string lines = std::string("cache-hit=") + (entry.cache_hit() ? "true" : "false") + "\n" + "cache-primary-key=" + entry.primary_key +
                      "\n" + "cache-matched-key=" + (entry.match ? entry.match->key : "") + "\n";
  if (to_stdout) std::cout << lines << std::flush;
  const char* path = std::getenv("GITHUB_OUTPUT");
  if (!path || !*path) return Status();
  int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status(std::string("opening $GITHUB_OUTPUT ") + path);
  size_t off = 0;
  while (off < lines.size()) {
    ssize_t n = ::write(fd, lines.data() + off, lines.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = errno_status(std::string("writing $GITHUB_OUTPUT ") + path);
      ::close(fd);
      return s;
    }
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status();
}

}  // namespace lazycache::cli
