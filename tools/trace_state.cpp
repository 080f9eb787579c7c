// SPDX-License-Identifier: MIT
#include "tools/trace_state.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <thread>
#include <unordered_set>

#include "common/posix_files.h"
#include "tools/mount_state.h"

namespace lazycache::cli {
bool path_within(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path.size() >= dir.size() && path.compare(0, dir.size(), dir) == 0 && (path.size() == dir.size() || path[dir.size()] == '/');
}

std::string TraceInfo::info_file() const { return run_dir() + "/trace-" + std::to_string(pid) + ".info"; }
std::string TraceInfo::list_file() const { return run_dir() + "/trace-" + std::to_string(pid) + ".list"; }

std::string TraceInfo::stop_file() const { return run_dir() + "/trace-" + std::to_string(pid) + ".stop"; }
std::string TraceInfo::log_file() const { return run_dir() + "/trace-" + std::to_string(pid) + ".log"; }

void give_to_sudo_user(const std::string& path) {
  const char* uid = std::getenv("SUDO_UID");
  const char* gid = std::getenv("SUDO_GID");
  if (::geteuid() != 0 || uid == nullptr || gid == nullptr) return;
  char* end = nullptr;
  const unsigned long u = std::strtoul(uid, &end, 10), g = std::strtoul(gid, nullptr, 10);
  if (end == uid || *end != '\0') return;
  ignore_error(::chown(path.c_str(), static_cast<uid_t>(u), static_cast<gid_t>(g)) == 0 ? Status() : errno_status("chown " + path),
               "the sudo user then cannot read the list: its save has no hot list");
}

std::string TraceInfo::to_text() const {
  std::string s = "pid=" + std::to_string(pid) + "\nstart=" + std::to_string(start_ticks) + "\nstate=" + (stopped ? "stopped" : "running") +
                  "\n";
  for (const auto& p : paths) s += "path=" + p + "\n";
  if (stopped) s += "events=" + std::to_string(events) + "\nevents_in_paths=" + std::to_string(events_in_paths) + "\n";
  return s;
}

Result<TraceInfo> TraceInfo::parse(const std::string& text) {
  TraceInfo t;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    const bool number = k != "state" && k != "path";
    if (number && (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos))
      return Status(ErrorCode::kCorrupt, "trace state: " + k + " is not a number");
    if (k == "pid") t.pid = static_cast<pid_t>(std::stol(v));
    if (k == "start") t.start_ticks = std::stoull(v);
    if (k == "state") t.stopped = v == "stopped";
    if (k == "path") t.paths.push_back(v);
    if (k == "events") t.events = std::stoull(v);
    if (k == "events_in_paths") t.events_in_paths = std::stoull(v);
  }
  if (t.pid <= 0 || t.paths.empty()) return Status(ErrorCode::kCorrupt, "trace state without pid or path");
  return t;
}

std::vector<TraceInfo> list_traces() {
  std::vector<TraceInfo> out;
  for (const std::string& name : list_dir(run_dir())) {
    if (name.rfind("trace-", 0) != 0 || name.size() < 11 || name.compare(name.size() - 5, 5, ".info") != 0) continue;
    auto text = read_whole_file(run_dir() + "/" + name, 1 << 20);
    if (!text.ok()) continue;
    if (auto t = TraceInfo::parse(*text); t.ok()) out.push_back(*t);
  }
  return out;
}

bool trace_running(const TraceInfo& t) {
  if (!process_alive(t.pid)) return false;
  auto now = process_start_ticks(t.pid);
  return !now || t.start_ticks == 0 || *now == t.start_ticks;
}

std::vector<TraceInfo> traces_for(const std::vector<std::string>& abs_paths) {
  std::vector<TraceInfo> out;
  for (TraceInfo& t : list_traces()) {
    bool hit = false;
    for (const auto& tp : t.paths)
      for (const auto& p : abs_paths) hit = hit || path_within(p, tp) || path_within(tp, p);
    if (hit) out.push_back(std::move(t));
  }
  return out;
}

Status stop_trace(TraceInfo& t) {
  if (t.stopped) return Status();
  if (trace_running(t)) {
    UniqueFd ctl(::open(t.stop_file().c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
    if (!ctl.valid() || ::write(ctl.get(), "s", 1) != 1) {
      if (::kill(t.pid, SIGTERM) != 0 && errno != ESRCH) return errno_status("signalling tracer " + std::to_string(t.pid));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (trace_running(t)) {
      if (auto text = read_whole_file(t.info_file(), 1 << 20); text.ok() && text->find("\nstate=stopped\n") != std::string::npos) break;
      if (std::chrono::steady_clock::now() > deadline)
        return Status(ErrorCode::kTimeout, "tracer " + std::to_string(t.pid) + " did not stop within 60 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  auto text = read_whole_file(t.info_file(), 1 << 20);
  if (!text.ok() || text->find("\nstate=stopped\n") == std::string::npos)
    return Status(ErrorCode::kIo,
                  "tracer " + std::to_string(t.pid) + " of " + t.paths.front() + " ended without writing its list (killed?)");
  if (auto now = TraceInfo::parse(*text); now.ok()) t = *now;
  t.stopped = true;
  return Status();
}

std::vector<std::string> read_trace_list(const TraceInfo& t) {
  std::vector<std::string> out;
  auto text = read_whole_file(t.list_file(), 256 << 20);
  if (!text.ok()) return out;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(line);
  return out;
}

void remove_trace_files(const TraceInfo& t) {
  ::unlink(t.list_file().c_str());
  ::unlink(t.info_file().c_str());
  ::unlink(t.stop_file().c_str());
  ::unlink(t.log_file().c_str());
}

std::vector<std::string> hot_members(const std::vector<std::string>& traced, const std::vector<std::string>& roots) {
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  for (const std::string& p : traced) {
    for (const std::string& r : roots) {
      if (!path_within(p, r) || p.size() < 2) continue;
      if (seen.insert(p).second) out.push_back(p.substr(1));
      break;
    }
  }
  return out;
}

std::vector<std::string> hot_list_from_traces(const std::string& command, const std::vector<std::string>& roots,
                                              std::vector<TraceInfo>* used) {
  std::vector<std::string> traced;
  for (TraceInfo& t : traces_for(roots)) {
    if (Status s = stop_trace(t); !s.ok()) {
      std::cerr << "lazycache " << command << ": not using the trace of " << t.paths.front() << " (" << s.to_string()
                << "); saving without its hot list\n";
      used->push_back(t);  // a dead tracer's files are of no further use
      continue;
    }
    for (auto& p : read_trace_list(t)) traced.push_back(std::move(p));
    used->push_back(t);
  }
  return hot_members(traced, roots);
}

}  // namespace lazycache::cli
