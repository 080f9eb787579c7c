// SPDX-License-Identifier: MIT
// File: tools/store_options.h -- the store and key options every store-facing command shares
// (save, restore, lookup, mount, and ls/cat/info/verify with --store), and the helpers that turn
// them into an ObjectStore, a resolved cache entry and that entry's ByteSource.
//
// Typical use (mount, restore):
//   add_store_options(args); add_key_options(args); ... args.parse(...)
//   LC_ASSIGN_OR_RETURN(auto store, open_store(args));
//   LC_ASSIGN_OR_RETURN(auto entry, resolve_entry(*store, args));
//   if (entry.match) { LC_ASSIGN_OR_RETURN(auto src, open_entry_source(store, *entry.match)); ... }
//   print_key_outputs(entry);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/byte_source.h"
#include "remote/cache_keys.h"
#include "remote/object_store.h"
#include "remote/transfer_config.h"
#include "tools/command.h"

namespace lazycache::cli {

// --store URL (else $LAZYCACHE_STORE, else default_store_dir()), --endpoint, --region,
// --path-style / --virtual-hosted, --sign-payload, --concurrency N|auto, --part-size SIZE|auto,
// --memory-budget SIZE, --retries N.
// kRead (lookup, doctor, ls/cat/info/verify/extract --key) hides the upload options
// (--sign-payload, --concurrency, --part-size, --memory-budget) from --help: they do nothing
// there, and are still accepted so that one set of store options works for every command.
// mount and restore take them (a writable mount records them for `unmount --save`).
// kMount: --memory-budget is the mount's frame memory, and --upload-budget SIZE what its
// `unmount --save` uploads with (recorded as that save's --memory-budget).
enum class StoreUse { kRead, kWrite, kMount };
void add_store_options(ArgParser& args, StoreUse use = StoreUse::kWrite);
// --key K, --restore-keys PREFIX (repeatable; newline-separated lists are split, as actions/cache
// passes them), --scope S, and --any-paths (take an entry saved for other paths: its version is
// not checked). `save` has no use for --restore-keys or --any-paths: `with_restore_keys` false.
void add_key_options(ArgParser& args, bool with_restore_keys = true);

// ~/.cache/lazycache/store, or /var/cache/lazycache/store as root ($XDG_CACHE_HOME honoured).
std::string default_store_dir();

// The store options of a command line, parsed once into typed values: what open_store() opens,
// and what a save record keeps for a later `unmount --save` (tools/save_record.h), so nothing is
// turned back into argv strings and parsed again.
struct StoreSettings {
  enum class Addressing { kAuto, kPathStyle, kVirtualHosted };
  std::string url;       // --store; "": $LAZYCACHE_STORE, else default_store_dir(), when opened
  std::string endpoint;  // --endpoint; "": $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, the profile's, AWS
  std::string region;    // --region; "": $AWS_REGION, $AWS_DEFAULT_REGION, the profile's, us-east-1
  // --path-style / --virtual-hosted; auto: path-style with a custom endpoint or a dotted bucket.
  Addressing addressing = Addressing::kAuto;
  bool sign_payload = false;        // --sign-payload
  remote::TransferConfig transfer;  // --concurrency, --part-size, --memory-budget, --retries
  bool operator==(const StoreSettings&) const = default;
};
// kInvalidArgument naming the option (a bad size, --path-style with --virtual-hosted, ...).
Result<StoreSettings> store_settings_from(const ArgParser& args);
// The store the settings name, wrapped in RetryingObjectStore. Reads AWS_* variables and
// ~/.aws files for s3://. Errors: kInvalidArgument (bad URL/options), kIo (local directory),
// kPermissionDenied (no credentials for s3://).
// `max_attempts` > 0 overrides --retries (doctor: a quick answer rather than minutes of backoff).
Result<std::shared_ptr<remote::ObjectStore>> open_store(const StoreSettings& settings, int max_attempts = 0);
// The same from a command line (store_settings_from, then open_store).
Result<std::shared_ptr<remote::ObjectStore>> open_store(const ArgParser& args, int max_attempts = 0);
// The store URL the settings name: --store, else $LAZYCACHE_STORE, else default_store_dir().
std::string store_url_of(const StoreSettings& settings);
std::string store_url_from(const ArgParser& args);
// --concurrency / --part-size / --memory-budget as a TransferConfig (kInvalidArgument if bad).
// --part-size is 1M..5G here (a restore's range reads); see check_upload_part_size.
Result<remote::TransferConfig> transfer_config_from(const ArgParser& args);
inline constexpr uint64_t kMinRangePartSize = 1ull << 20;
// kInvalidArgument when an explicit --part-size is below S3's 5 MiB part minimum: for the
// commands that upload (save, unmount --save), checked before anything is read or sent.
Status check_upload_part_size(const remote::TransferConfig& config);

struct ResolvedEntry {
  std::string scope;
  std::string primary_key;
  std::vector<std::string> restore_prefixes;
  std::optional<std::string> version;     // of the paths asked for; nullopt: any (--any-paths, or none given)
  std::vector<std::string> saved_paths;   // the paths asked for (absolute)
  std::optional<remote::KeyMatch> match;  // nullopt: a miss
  // On a miss: what the primary key was saved for instead ("/w/a, /w/b; /w/c"), "" when it was
  // not saved at all (remote::KeyResolution::other_versions, their indexes read).
  std::string saved_for_other_paths;
  // Asked for with tail_bytes (mount): the exact match's last bytes, read by the lookup
  // (remote::KeyResolution::tail); empty otherwise.
  std::string tail;
  bool cache_hit() const { return match && match->exact; }
};

// --restore-keys values, split at newlines, blanks dropped.
std::vector<std::string> restore_prefixes_from(const ArgParser& args);
// The key options (add_key_options) parsed once: what resolve_entry() looks up.
struct KeyOptions {
  std::string key;                            // --key; "": resolve_entry() fails with kInvalidArgument
  std::string scope;                          // --scope
  std::vector<std::string> restore_prefixes;  // --restore-keys, as restore_prefixes_from() splits them
  bool any_paths = false;                     // --any-paths
  bool operator==(const KeyOptions&) const = default;
};
KeyOptions key_options_from(const ArgParser& args);
// Resolves --key / --restore-keys / --scope for `saved_paths` (absolute, in the order given: the
// entry's version, remote::entry_version; none given or --any-paths: any version). An entry of
// the key saved for other paths is a miss, and saved_for_other_paths says what they were (one
// tail read per such entry, at most three, on the miss path only). kInvalidArgument without
// --key. With kUse (restore, mount, reading commands) the matched entry's use is recorded
// (ObjectStore::record_access) for least-recently-used pruning; `lookup` only looks (kLookOnly).
// tail_bytes > 0: an exact hit is found by reading the entry's tail (ResolvedEntry::tail) instead
// of a HEAD (remote::resolve_cache_key): what a mount reads first anyway, so it saves a request.
enum class EntryUse { kUse, kLookOnly };
// The tail `mount` and `restore --extract` ask resolve_entry() for: it finds the entry as a HEAD
// would and brings the seek table and index with it, so the archive is open after one request
// when they fit. 1 MiB holds the index of ~25,000 entries (~36 bytes each compressed, most of it
// the per-file content digest: the node fixture's is 906 KiB): the 256 KiB ArchiveReader::open
// reads by itself needed a second round trip for node_modules-sized trees (45 ms hosted, 85 ms
// far), while the extra 768 KiB costs ~9 ms at 700 Mbit/s and ~60 ms at 100 Mbit/s per
// connection. A larger index costs one more read, of only the bytes before this tail.
inline constexpr uint64_t kEntryTailBytes = 1 << 20;
Result<ResolvedEntry> resolve_entry(std::shared_ptr<remote::ObjectStore> store, const KeyOptions& key,
                                    const std::vector<std::string>& saved_paths, EntryUse use = EntryUse::kUse, uint64_t tail_bytes = 0);
// The same from a command line (key_options_from, then resolve_entry).
Result<ResolvedEntry> resolve_entry(std::shared_ptr<remote::ObjectStore> store, const ArgParser& args,
                                    const std::vector<std::string>& saved_paths, EntryUse use = EntryUse::kUse);
// "no entry for key K with these paths (P) in STORE; saved for: ... (--any-paths takes it)", or
// "" when the miss has no such explanation (the key was not saved at all).
std::string other_paths_message(const ResolvedEntry& entry, const std::string& store_description);
// The entry object's name for --key in --scope saved for paths of `version` (what save writes).
Result<std::string> primary_object_key(const ArgParser& args, const std::string& version);

// A ByteSource over the matched entry, pinned to its ETag (no request is made).
std::shared_ptr<ByteSource> open_entry_source(std::shared_ptr<remote::ObjectStore> store, const remote::ObjectInfo& object);

// Prints "cache-hit=…", "cache-primary-key=…", "cache-matched-key=…" to stdout (not with
// `to_stdout` false: --json, whose object holds the same) and appends the same lines to
// $GITHUB_OUTPUT when set. Call it only once the command has done its job (a failed command
// must not tell a workflow cache-hit=true). Errors: kIo writing $GITHUB_OUTPUT.
Status print_key_outputs(const ResolvedEntry& entry, bool to_stdout = true);

}  // namespace lazycache::cli
