// SPDX-License-Identifier: MIT
// `lazycache trace start PATH...` / `lazycache trace stop [--discard] PATH...`: record the files
// a job reads under PATHs on a plain directory (a cache miss), so that the first `save` of them
// lays those files out first and records them as the hot list, as `unmount --save` does with the
// reads it saw in a mount (docs/writable.md, "Learned layout from a traced job").
//
// `trace start` marks the file systems (tools/fanotify_tracer.h), forks the tracer, writes its
// state file (tools/trace_state.h) and returns: every open made after it returns is recorded.
// Without CAP_SYS_ADMIN or without fanotify it says so once and exits 0 (the save that follows
// has no hot list); CI steps need not guard it.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "tools/command.h"
#include "tools/fanotify_tracer.h"
#include "tools/mount_state.h"
#include "tools/run_files.h"
#include "tools/trace_state.h"

namespace lazycache::cli {
namespace {

std::string joined(const std::vector<std::string>& paths) {
  std::string s;
  for (const auto& p : paths) s += (s.empty() ? "" : ", ") + p;
  return s;
}

// The tracer process: waits until the starting command has written the state file (its end of
// `go` closes), records until SIGTERM or a byte on its stop FIFO, then writes the list and the
// stopped state.
[[noreturn]] void run_tracer(FanotifyTracer tracer, int go, pid_t starter) {
  ::setsid();
  TraceInfo info;
  info.pid = ::getpid();
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const int log = ::open(info.log_file().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kRunFileMode);
  give_to_sudo_user(info.log_file());
  ::dup2(null, 0);
  ::dup2(null, 1);  // a caller reading our stdout ($(lazycache trace start ...)) must not wait for us
  ::dup2(log >= 0 ? log : null, 2);
  char byte;
  while (::read(go, &byte, 1) > 0) {}
  ::close(go);
  // O_RDWR: the FIFO never reads as closed (POLLHUP) between two writers.
  UniqueFd stop(::open(info.stop_file().c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
  tracer.ignore_pid(starter);
  Status s = tracer.serve(info.list_file(), stop.get());
  if (!s.ok()) std::cerr << "lazycache trace: " << s.to_string() << "\n";
  auto text = read_whole_file(info.info_file(), 1 << 20);
  auto parsed = text.ok() ? TraceInfo::parse(*text) : Result<TraceInfo>(text.error());
  if (parsed.ok()) {
    info = *parsed;
  } else {
    for (const auto& p : tracer.paths()) info.paths.push_back(p.shown);
  }
  info.stopped = true;
  info.events = tracer.events();
  info.events_in_paths = tracer.events_in_paths();
  ignore_error(write_run_file(info.info_file(), info.to_text()), "stop_trace() reports a tracer that ended without it");
  give_to_sudo_user(info.info_file());
  ::_exit(s.ok() ? 0 : 1);
}

int trace_start(const std::vector<std::string>& paths) {
  // Every path below one a running tracer records already: nothing to start.
  auto covered = [](const std::string& p, const TraceInfo& t) {
    for (const auto& tp : t.paths)
      if (path_within(p, tp)) return true;
    return false;
  };
  for (const TraceInfo& t : traces_for(paths)) {
    if (!trace_running(t) || t.stopped) continue;
    bool all = true;
    for (const auto& p : paths) all = all && covered(p, t);
    if (!all) continue;
    std::cout << "already tracing " << joined(t.paths) << " (tracer pid " << t.pid << ")\n";
    return kExitOk;
  }
  if (Status s = make_run_dir(); !s.ok()) return report_error("trace", s);
  auto tracer = FanotifyTracer::open(paths);
  if (!tracer.ok()) {
    const ErrorCode c = tracer.error().code();
    if (c != ErrorCode::kPermissionDenied && c != ErrorCode::kUnsupported) return report_error("trace", tracer.error());
    std::cerr << "lazycache trace: not tracing " << joined(paths) << ": " << tracer.error().message()
              << "; a save of them will have no hot list\n";
    return kExitOk;
  }
  // Blocked before the fork, so a stop that comes at once is not lost: the tracer takes them
  // through its signalfd.
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGTERM, SIGINT, SIGUSR1}) sigaddset(&set, s);
  sigset_t old;
  ::sigprocmask(SIG_BLOCK, &set, &old);
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return report_error("trace", errno_status("pipe"));
  const pid_t starter = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return report_error("trace", errno_status("fork"));
  if (pid == 0) {
    ::close(go[1]);
    ::signal(SIGHUP, SIG_IGN);
    run_tracer(std::move(*tracer), go[0], starter);
  }
  ::close(go[0]);
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  TraceInfo info;
  info.pid = pid;
  info.start_ticks = process_start_ticks(pid).value_or(0);
  info.paths = paths;
  Status s = ::mkfifo(info.stop_file().c_str(), kRunFileMode) == 0 ? Status() : errno_status("mkfifo " + info.stop_file());
  give_to_sudo_user(info.stop_file());
  if (s.ok()) s = write_run_file(info.info_file(), info.to_text());
  give_to_sudo_user(info.info_file());
  ::close(go[1]);  // the tracer goes on (it has recorded since the marks were made)
  if (!s.ok()) {
    ::kill(pid, SIGTERM);
    return report_error("trace", s.with_context("writing the tracer's state"));
  }
  std::cout << "tracing reads under " << joined(paths) << " (tracer pid " << pid << "); `lazycache save` of them uses it\n";
  return kExitOk;
}

int trace_stop(const std::vector<std::string>& paths, bool discard) {
  auto traces = traces_for(paths);
  if (traces.empty()) {
    std::cerr << "lazycache trace: no trace of " << joined(paths) << "\n";
    return kExitOk;
  }
  int code = kExitOk;
  for (TraceInfo& t : traces) {
    Status s = stop_trace(t);
    if (discard) remove_trace_files(t);
    if (!s.ok()) {
      code = report_error("trace", s);
      continue;
    }
    if (discard) {
      std::cout << "stopped tracer " << t.pid << " of " << joined(t.paths) << " and discarded its list\n";
    } else {
      std::cout << "stopped tracer " << t.pid << " of " << joined(t.paths) << ": " << read_trace_list(t).size() << " files read, in "
                << t.list_file() << " (" << t.events << " events, " << t.events_in_paths << " under the traced paths)\n";
    }
  }
  return code;
}

int run_trace(ArgParser& args) {
  args.flag("discard", "stop: remove the list instead of keeping it for the next save");
  int code = 0;
  if (!args.parse(code)) return code;
  const auto& pos = args.positionals();
  if (pos.size() < 2 || (pos[0] != "start" && pos[0] != "stop")) {
    std::cerr << "lazycache trace: usage: lazycache trace start PATH... | lazycache trace stop [--discard] PATH...\n";
    return kExitUsage;
  }
  std::vector<std::string> paths;
  for (size_t i = 1; i < pos.size(); ++i) paths.push_back(absolute_path(pos[i]));
  return pos[0] == "start" ? trace_start(paths) : trace_stop(paths, args.has("discard"));
}

const CommandRegistration kTrace{"trace", "record the files a job reads under PATHs, as the hot list of their first save",
                                 "start PATH... | stop [--discard] PATH...", run_trace};

}  // namespace
}  // namespace lazycache::cli
