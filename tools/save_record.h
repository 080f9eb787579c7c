// SPDX-License-Identifier: MIT
// File: tools/save_record.h -- how `mount` tells a later `unmount --save` what to save where.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "format/archive.h"
#include "format/archive_writer.h"
#include "tools/command.h"
#include "tools/store_options.h"

namespace lazycache::cli {

// What `unmount --save PATH` needs to know about how PATH was mounted, written by `mount` as
// RUN_DIR/save-<PATH with '/' as '_'>.info, mode 0600 (also on a cache miss, where PATH is left a
// plain directory and no daemon runs). No credentials: typed store settings only (URLs, flags,
// sizes), the URLs redacted (remote::redact_url: no userinfo, no signature or token parameters).
//
// The file (format 2; docs/writable.md): one `name=value` line each, in this order, unknown
// names ignored (so a later version can add lines), empty values left out:
//   format=2
//   path=/abs/mount/point        primary_key=K        scope=S       version=16 hex digits
//   exact_hit=0|1                pid=N                state_dir=DIR cache_dir=DIR
//   xattrs=user|stored|none      base_etag=E          base_member=ARCHIVE/PATH
//   base_object=OBJECT/NAME      base_size=BYTES      base_tail=BYTES
//   base_tail_digest=16 hex digits
//   store=URL                    endpoint=URL         region=R
//   addressing=auto|path|virtual sign_payload=0|1
//   concurrency=N (0: auto)      part_size=BYTES (0: auto)
//   memory_budget=BYTES (what the save uploads within: mount's --upload-budget)
//   retries=N
// Format 1 (no `format` line; lazycache before this one, still read so that a mount made by it
// can be saved by this one) held the store options as `store_arg=--name=value` argv strings.
struct SaveRecord {
  std::string path;         // absolute mount point
  std::string primary_key;  // --key
  std::string scope;        // --scope
  bool exact_hit = false;   // the mounted entry is the primary key itself
  pid_t pid = 0;            // the mount daemon; 0 on a miss
  std::string state_dir;    // the overlay's state (upper/ + work/); empty on a miss or --read-only
  StoreSettings store;      // as given to mount, parsed; its memory budget is mount's --upload-budget
  std::string cache_dir;    // the daemon's chunk cache (absolute); empty: the default
  // The xattrs a save of this path stores (see xattrs_to_keep). Records without the line (older
  // mounts, misses): user.* only.
  format::XattrSet xattrs = format::XattrSet::kUser;
  // The mounted entry as the mount saw it: its ETag (a save builds on that object only, so a base
  // replaced since gives a full pack) and the archive path of the root mounted here (the save
  // names this path's members as the base does: tools/incremental_save.h). Empty in records
  // written before these lines existed and on misses.
  std::string base_etag = std::string();
  std::string base_member = std::string();
  // The mounted entry's object name (its version may not be this save's: --any-paths), and the
  // version this save is named for: remote::entry_version of the mount points in mount order.
  // Empty in records written before these lines: the version is then made from the paths of the
  // records saved together, the base's name from its key.
  std::string base_object = std::string();
  std::string version = std::string();
  // The mounted entry's size and the length of its tail (index frame and seek table: the bytes
  // after its last data frame), so the save reads the whole tail in one ranged GET pinned to
  // base_etag, without a HEAD first (tools/base_entry.h). 0 in records written before these lines
  // (and on misses): the save then asks the store (HEAD, then one or two reads of the tail).
  uint64_t base_size = 0;
  uint64_t base_tail = 0;
  // XXH3-64 (16 hex digits) of the copy of the base's tail that mount kept in
  // state_dir/base-tail (tools/base_entry.h): the save opens the base from it without a round
  // trip. Empty: no copy (an older mount, a tail the lookup did not read whole, a failed write).
  std::string base_tail_digest = std::string();

  std::string to_text() const;
  // kCorrupt without a path or key, or with a value that does not parse (a size, a number).
  static Result<SaveRecord> parse(const std::string& text);
};
// What saves of a mount of `index` keep, so a save behaves like the entry's own: every xattr
// `pack --xattrs` stores when the entry holds any (it was saved with --xattrs), else user.* only
// (those only the job can have set; a host's security labels on new files are not the job's).
format::XattrSet xattrs_to_keep(const format::Index& index);
std::string save_record_path(const std::string& mountpoint);
Status write_save_record(const SaveRecord& record);
// kNotFound when `mount` left no record for the path. A redacted --store (--endpoint) URL
// is replaced by $LAZYCACHE_STORE ($AWS_ENDPOINT_URL) when that redacts to the recorded URL:
// the secret is asked of the environment again, never read back from the file.
Result<SaveRecord> read_save_record(const std::string& mountpoint);
// That replacement, on a record already read (read_save_record() does it).
void restore_store_secrets(SaveRecord& record);
// The store settings of a parsed command line (tools/store_options.h) as a record keeps them:
// $LAZYCACHE_STORE made explicit, every URL through remote::redact_url(), and for `mount`
// (StoreUse::kMount) its --upload-budget as the save's memory budget (mount's own
// --memory-budget is frame memory). Never credentials: those come from the environment and
// ~/.aws again when the record is used. kInvalidArgument as store_settings_from().
Result<StoreSettings> recorded_store_settings(const ArgParser& args, StoreUse use);
// The typed part of that: `settings` with $LAZYCACHE_STORE made explicit and the URLs redacted
// (the memory budget is the caller's: a mount's --upload-budget).
StoreSettings settings_for_record(StoreSettings settings);
// The record lines of `settings` (format 2, above): also what tells two mounts' stores apart.
std::string store_settings_text(const StoreSettings& settings);

}  // namespace lazycache::cli
