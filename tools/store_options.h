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
// passes them), --scope S. `save` has no use for --restore-keys: `with_restore_keys` false.
void add_key_options(ArgParser& args, bool with_restore_keys = true);

// ~/.cache/lazycache/store, or /var/cache/lazycache/store as root ($XDG_CACHE_HOME honoured).
std::string default_store_dir();

// The store the options name, wrapped in RetryingObjectStore. Reads AWS_* variables and
// ~/.aws files for s3://. Errors: kInvalidArgument (bad URL/options), kIo (local directory),
// kPermissionDenied (no credentials for s3://).
// `max_attempts` > 0 overrides --retries (doctor: a quick answer rather than minutes of backoff).
Result<std::shared_ptr<remote::ObjectStore>> open_store(const ArgParser& args, int max_attempts = 0);
// The store URL the options name: --store, else $LAZYCACHE_STORE, else default_store_dir().
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
  std::optional<remote::KeyMatch> match;  // nullopt: a miss
  bool cache_hit() const { return match && match->exact; }
};

// --restore-keys values, split at newlines, blanks dropped.
std::vector<std::string> restore_prefixes_from(const ArgParser& args);
// Resolves --key / --restore-keys / --scope. kInvalidArgument without --key. With kUse (restore,
// mount, reading commands) the matched entry's use is recorded (ObjectStore::record_access) for
// least-recently-used pruning; `lookup` only looks (kLookOnly).
enum class EntryUse { kUse, kLookOnly };
Result<ResolvedEntry> resolve_entry(remote::ObjectStore& store, const ArgParser& args, EntryUse use = EntryUse::kUse);
// The entry object's name for --key in --scope (what save writes).
Result<std::string> primary_object_key(const ArgParser& args);

// A ByteSource over the matched entry, pinned to its ETag (no request is made).
std::shared_ptr<ByteSource> open_entry_source(std::shared_ptr<remote::ObjectStore> store, const remote::ObjectInfo& object);

// Prints "cache-hit=…", "cache-primary-key=…", "cache-matched-key=…" to stdout (not with
// `to_stdout` false: --json, whose object holds the same) and appends the same lines to
// $GITHUB_OUTPUT when set. Call it only once the command has done its job (a failed command
// must not tell a workflow cache-hit=true). Errors: kIo writing $GITHUB_OUTPUT.
Status print_key_outputs(const ResolvedEntry& entry, bool to_stdout = true);

}  // namespace lazycache::cli
