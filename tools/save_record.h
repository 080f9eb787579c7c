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

namespace lazycache::cli {

// What `unmount --save PATH` needs to know about how PATH was mounted, written by `mount` as
// RUN_DIR/save-<PATH with '/' as '_'>.info, mode 0600 (also on a cache miss, where PATH is left a
// plain directory and no daemon runs). No credentials: store options only (URLs, flags, sizes),
// and the URLs redacted (remote::redact_url: no userinfo, no signature or token parameters).
struct SaveRecord {
  std::string path;                     // absolute mount point
  std::string primary_key;              // --key
  std::string scope;                    // --scope
  bool exact_hit = false;               // the mounted entry is the primary key itself
  pid_t pid = 0;                        // the mount daemon; 0 on a miss
  std::string state_dir;                // the overlay's state (upper/ + work/); empty on a miss or --read-only
  std::vector<std::string> store_args;  // "--store=URL", "--path-style", ... as given to mount
  std::string cache_dir;                // the daemon's chunk cache (absolute); empty: the default
  // The xattrs a save of this path stores (see xattrs_to_keep). Records without the line (older
  // mounts, misses): user.* only.
  format::XattrSet xattrs = format::XattrSet::kUser;
  // The mounted entry as the mount saw it: its ETag (a save builds on that object only, so a base
  // replaced since gives a full pack) and the archive path of the root mounted here (the save
  // names this path's members as the base does: tools/incremental_save.h). Empty in records
  // written before these lines existed and on misses.
  std::string base_etag = std::string();
  std::string base_member = std::string();

  std::string to_text() const;
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
// The store options of a parsed command line (tools/store_options.h), as "--name=value" and
// "--flag" strings, with $LAZYCACHE_STORE made explicit, each through remote::redact_url().
// mount's --upload-budget becomes the save's --memory-budget (mount's own is frame memory).
// Never credentials: those come from the environment and ~/.aws again when the record is used.
std::vector<std::string> recorded_store_args(const ArgParser& args);

}  // namespace lazycache::cli
