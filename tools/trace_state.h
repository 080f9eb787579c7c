// SPDX-License-Identifier: MIT
// File: tools/trace_state.h -- how `trace start`, `trace stop` and `save` find a tracer.
//
// Each tracer (tools/fanotify_tracer.h) owns RUN_DIR/trace-<pid>.info:
//   pid=<pid>  start=<process start time>  state=running|stopped
//   path=<abs path>            (one line per traced path, as the user named it)
//   events=<n>  events_in_paths=<n>   (once stopped: the events it read, and those under the paths)
// written by `trace start` before it returns and again by the tracer when it stops;
// RUN_DIR/trace-<pid>.list: the files the job read under those paths, absolute, first read
// first, written when the tracer stops (or is asked with SIGUSR1); RUN_DIR/trace-<pid>.stop, a
// FIFO: a byte written to it stops the tracer (so a user can stop a tracer that `sudo` started:
// the user could not signal it); RUN_DIR/trace-<pid>.log, the tracer's errors. Under sudo
// (euid 0 and SUDO_UID set) the tracer gives these files to the sudo user, so that user's
// `save` reads and removes them (the Action: a root tracer, a save as the runner user). A save
// that used a trace removes them; `trace stop` keeps the list for the save that follows.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace lazycache::cli {

struct TraceInfo {
  pid_t pid = 0;
  uint64_t start_ticks = 0;
  bool stopped = false;
  std::vector<std::string> paths;
  uint64_t events = 0, events_in_paths = 0;  // what the tracer read (when stopped)

  std::string info_file() const;
  std::string list_file() const;
  std::string stop_file() const;
  std::string log_file() const;
  std::string to_text() const;
  static Result<TraceInfo> parse(const std::string& text);
};

// `path` is `dir` or lies below it (both absolute, normalised).
bool path_within(const std::string& path, const std::string& dir);

// Under sudo (euid 0, SUDO_UID set): chown `path` to the sudo user; otherwise nothing.
void give_to_sudo_user(const std::string& path);

// Every readable trace-*.info in run_dir().
std::vector<TraceInfo> list_traces();
// True while the tracer runs (its pid alive with the recorded start time).
bool trace_running(const TraceInfo& t);
// The traces with a path that is, holds or lies below one of `abs_paths`.
std::vector<TraceInfo> traces_for(const std::vector<std::string>& abs_paths);
// Stops a running tracer (a byte to its FIFO, else SIGTERM) and waits until it has written its list (it drains the
// queue first: a busy job can leave many opens to read). Errors: kTimeout after 60 s, kIo
// when it died without a list.
Status stop_trace(TraceInfo& t);
// The list a stopped tracer wrote (empty when there is none).
std::vector<std::string> read_trace_list(const TraceInfo& t);
void remove_trace_files(const TraceInfo& t);

// The archive members (absolute path less the leading '/', as `save` names members) of the
// traced files under `roots` (absolute), in trace order, each once.
std::vector<std::string> hot_members(const std::vector<std::string>& traced, const std::vector<std::string>& roots);

}  // namespace lazycache::cli

namespace lazycache::cli {

// For `save`: stops the traces of `roots` (absolute), says once on stderr when one cannot be used
// (`command` names the caller), and returns the members the job read under `roots`, first read
// first. `used` gets the traces to remove once the entry is saved (a failed save keeps them).
std::vector<std::string> hot_list_from_traces(const std::string& command, const std::vector<std::string>& roots,
                                              std::vector<TraceInfo>* used);

}  // namespace lazycache::cli
