// SPDX-License-Identifier: MIT
// `lazycache status`: live figures of lazycache mounts. See docs/mount.md.
#include <iostream>

#include "format/quote.h"
#include "remote/store_url.h"
#include "tools/command.h"
#include "tools/mount_state.h"
#include "tools/run_dir_cleanup.h"

namespace lazycache::cli {
namespace {

int run_status(ArgParser& args) {
  args.flag("json", "one JSON object per mount point");
  int code = 0;
  if (!args.parse(code)) return code;
  const bool json = args.has("json");
  std::vector<std::pair<std::string, std::optional<DaemonState>>> rows;
  // A mount that has ended (a foreground mount's Ctrl-C, an external unmount) is not listed, and
  // its files go (tools/run_dir_cleanup.h).
  clean_finished_mounts();
  if (args.positionals().empty()) {
    for (auto& d : list_daemons()) {
      DaemonState fresh = refresh(d);
      for (const auto& m : fresh.mountpoints) rows.emplace_back(m, fresh);
    }
    // No mount: an empty JSON array, so that `status --json | jq` sees valid JSON, not nothing.
    if (rows.empty()) std::cout << (json ? "[]\n" : "no lazycache mounts\n");
  } else {
    for (const auto& p : args.positionals()) {
      std::string path = absolute_path(p);
      auto d = find_daemon(path);
      rows.emplace_back(path, d ? std::optional<DaemonState>(refresh(*d)) : std::nullopt);
    }
  }
  int rc = kExitOk;
  for (const auto& [path, d] : rows) {
    const bool stale = d && (is_stale_mount(path) || (!d->stopped && !daemon_alive(*d)));
    const char* state = !d ? "not-mounted" : stale ? "stale" : d->stopped || !is_lazycache_mount(path) ? "unmounted" : "mounted";
    if (std::string(state) != "mounted") rc = kExitFailure;
    // A killed daemon's leftovers would otherwise be listed (and counted by unmount --all) forever.
    if (stale) {
      clean_stale(path);
      std::cerr << "lazycache status: " << format::quote_path_if_needed(path) << ": daemon " << d->pid
                << " is gone; cleaned up its mount point and state\n";
    }
    if (json) {
      std::cout << "{\"path\":\"" << json_escape(path) << "\",\"state\":\"" << state << "\"";
      if (d) std::cout << ",\"pid\":" << d->pid << ",\"stats\":" << d->stats.to_json();
      std::cout << "}\n";
      continue;
    }
    if (!d) {
      std::cout << format::quote_path_if_needed(path) << ": not a lazycache mount\n";
      continue;
    }
    // The state file is redacted when written; redacting again covers files of older versions.
    std::cout << format::quote_path_if_needed(path) << ": " << state << " from " << remote::redact_url(d->archive) << " (daemon pid "
              << d->pid << ")\n  " << mount_summary(d->stats) << "\n";
  }
  return rc;
}

const CommandRegistration reg{"status", "live figures of lazycache mounts", "[--json] [PATH...]", run_status};

}  // namespace
}  // namespace lazycache::cli
