// SPDX-License-Identifier: MIT
#include "tools/fanotify_tracer.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/fanotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstring>

#include "tools/run_files.h"
#include "tools/trace_state.h"

namespace lazycache::cli {
namespace {

constexpr uint64_t kMask = FAN_OPEN | FAN_CLOSE_WRITE | FAN_CLOSE_NOWRITE;
// What an inode's ignore mark silences once its file was seen read: its later reads cost no event.
constexpr uint64_t kReadMask = FAN_OPEN | FAN_CLOSE_NOWRITE;

// `abs` with symlinks resolved through its nearest existing parent: "/a/link/new" -> "/a/t/new".
std::string resolve(const std::string& abs, std::string* existing) {
  std::string head = abs, tail;
  while (true) {
    auto real = real_path(head);
    if (real.ok()) {
      *existing = head;
      return (*real == "/" && !tail.empty() ? std::string() : *real) + tail;
    }
    const size_t slash = head.rfind('/');
    if (slash == std::string::npos || head == "/") {
      *existing = "/";
      return abs;
    }
    tail = head.substr(slash) + tail;
    head = slash == 0 ? "/" : head.substr(0, slash);
  }
}

Status mark(int fd, const std::string& path) {
  if (::fanotify_mark(fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, kMask, AT_FDCWD, path.c_str()) == 0) return Status();
  const int err = errno;
  // Some file systems (no fsid, e.g. older overlayfs or FUSE) take mount marks only.
  if ((err == EINVAL || err == ENODEV || err == EXDEV || err == EOPNOTSUPP) &&
      ::fanotify_mark(fd, FAN_MARK_ADD | FAN_MARK_MOUNT, kMask, AT_FDCWD, path.c_str()) == 0)
    return Status();
  if (err == EPERM) return Status(ErrorCode::kPermissionDenied, "fanotify mark on " + path + " needs CAP_SYS_ADMIN");
  return errno_status("fanotify mark on the file system of " + path, err);
}

}  // namespace

Result<FanotifyTracer> FanotifyTracer::open(const std::vector<std::string>& abs_paths) {
  FanotifyTracer t;
  // O_NOATIME: the tracer's descriptors must not change what the job sees.
  int fd = ::fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_UNLIMITED_QUEUE | FAN_UNLIMITED_MARKS,
                           O_RDONLY | O_LARGEFILE | O_CLOEXEC | O_NOATIME);
  if (fd < 0) {
    const int err = errno;
    if (err == EPERM) return Status(ErrorCode::kPermissionDenied, "fanotify needs CAP_SYS_ADMIN (run as root or with sudo)");
    if (err == ENOSYS) return Status(ErrorCode::kUnsupported, "this kernel has no fanotify");
    return errno_status("fanotify_init", err);
  }
  t.fd_.reset(fd);
  for (const std::string& p : abs_paths) {
    std::string existing;
    TracedPath tp{p, resolve(p, &existing)};
    LC_RETURN_IF_ERROR(mark(fd, existing));
    t.paths_.push_back(std::move(tp));
  }
  return t;
}

void FanotifyTracer::record(int event_fd, uint64_t mask) {
  // A file closed after a read-only open (inside the traced paths or not) gets an ignore mark for
  // reads, so that its next opens (a compiler's headers, a module loaded by several processes)
  // cost no event. The kernel clears it when the file is modified, and a close after writing
  // removes it, so a read after a write is reported again. Not on an open alone: that open may
  // be a write whose modification came before the mark. Errors only cost events: ignored.
  if (mask & FAN_CLOSE_WRITE) {
    (void)::fanotify_mark(fd_.get(), FAN_MARK_REMOVE | FAN_MARK_IGNORED_MASK, kReadMask, event_fd, nullptr);
  } else if (mask & FAN_CLOSE_NOWRITE) {
    (void)::fanotify_mark(fd_.get(), FAN_MARK_ADD | FAN_MARK_IGNORED_MASK, kReadMask, event_fd, nullptr);
  }
  char link[PATH_MAX];
  const std::string proc = "/proc/self/fd/" + std::to_string(event_fd);
  const ssize_t n = ::readlink(proc.c_str(), link, sizeof(link));
  if (n <= 0 || static_cast<size_t>(n) >= sizeof(link)) return;
  const std::string_view path(link, static_cast<size_t>(n));
  if (path.find('\n') != std::string_view::npos) return;  // the list is one path per line
  for (const TracedPath& tp : paths_) {
    if (!path.starts_with(tp.real) || (path.size() > tp.real.size() && path[tp.real.size()] != '/' && tp.real != "/")) continue;
    ++in_paths_;
    FileEvent e{(mask & FAN_OPEN) != 0, (mask & FAN_CLOSE_WRITE) != 0, (mask & FAN_CLOSE_NOWRITE) != 0};
    const std::string rest(path.substr(tp.real == "/" ? 0 : tp.real.size()));
    const std::string shown = tp.shown == "/" ? rest : tp.shown + rest;
    if (on_event_ != nullptr) (*on_event_)(shown, e);
    else order_.note(shown, e);
    return;
  }
}

void FanotifyTracer::drain() {
  alignas(struct fanotify_event_metadata) char buf[64 * 1024];
  while (true) {
    const ssize_t len = ::read(fd_.get(), buf, sizeof(buf));
    if (len <= 0) return;  // EAGAIN: the queue is empty
    auto* m = reinterpret_cast<struct fanotify_event_metadata*>(buf);
    for (ssize_t left = len; FAN_EVENT_OK(m, left); m = FAN_EVENT_NEXT(m, left)) {
      if (m->vers != FANOTIFY_METADATA_VERSION) return;
      if (m->mask & FAN_Q_OVERFLOW) ++overflows_;
      if (m->fd < 0) continue;
      ++events_;
      bool ignored = false;
      for (pid_t p : ignored_) ignored = ignored || m->pid == p;
      if (!ignored) record(m->fd, m->mask);
      ::close(m->fd);
    }
  }
}

Status FanotifyTracer::write_list(const std::string& list_file) const {
  std::string text;
  for (const std::string& p : order_.list()) text += p + "\n";
  LC_RETURN_IF_ERROR(write_run_file(list_file, text));
  give_to_sudo_user(list_file);
  return Status();
}

Status FanotifyTracer::follow(int control_fd, const std::function<void(const std::string&, const FileEvent&)>& on_event,
                              const std::function<bool()>& on_control) {
  ignored_.push_back(::getpid());
  on_event_ = &on_event;
  while (true) {
    struct pollfd fds[2] = {{fd_.get(), POLLIN, 0}, {control_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      on_event_ = nullptr;
      return errno_status("poll");
    }
    drain();  // before on_control: every event queued before its message is delivered first
    if (fds[1].revents != 0 && !on_control()) break;
  }
  on_event_ = nullptr;
  if (overflows_ > 0)
    return Status(ErrorCode::kIo, "the fanotify queue overflowed " + std::to_string(overflows_) + " times: opens were missed");
  return Status();
}

namespace {
constexpr int kOrphanCheckMs = 2000;
constexpr auto kMaxTraceLifetime = std::chrono::hours(24);
}  // namespace

Status FanotifyTracer::serve(const std::string& list_file, int stop_fd) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGTERM, SIGINT, SIGUSR1}) sigaddset(&set, s);
  ignored_.push_back(::getpid());  // the process serving, which may not be the one that opened
  UniqueFd sig(::signalfd(-1, &set, SFD_CLOEXEC));
  if (!sig.valid()) return errno_status("signalfd");
  // A tracer nobody can stop any more ends by itself: its run directory (the stop FIFO, the
  // list) was removed, as a runner removes RUNNER_TEMP after a job, or it has run for a day.
  // Otherwise it would watch every open of the file system until the machine stops.
  const std::string control_dir = list_file.substr(0, list_file.find_last_of('/') + 1);
  const auto started = std::chrono::steady_clock::now();
  auto last_check = started;
  while (true) {
    struct pollfd fds[3] = {{fd_.get(), POLLIN, 0}, {sig.get(), POLLIN, 0}, {stop_fd, POLLIN, 0}};
    const int ready = ::poll(fds, stop_fd >= 0 ? 3 : 2, kOrphanCheckMs);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return errno_status("poll");
    }
    // Checked by the clock, not only when idle: on a busy machine events never stop coming.
    if (const auto now = std::chrono::steady_clock::now(); now - last_check >= std::chrono::milliseconds(kOrphanCheckMs)) {
      last_check = now;
      struct stat st;
      if (!control_dir.empty() && ::stat(control_dir.c_str(), &st) != 0) return Status();
      if (now - started > kMaxTraceLifetime) return write_list(list_file);
    }
    if (ready == 0) continue;
    if (fds[0].revents & POLLIN) drain();
    bool stop = stop_fd >= 0 && (fds[2].revents & POLLIN) != 0;
    struct signalfd_siginfo si;
    if ((fds[1].revents & POLLIN) && ::read(sig.get(), &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
      stop = stop || si.ssi_signo != SIGUSR1;
    } else if (!stop) {
      continue;
    }
    drain();  // opens made before the request are queued already
    LC_RETURN_IF_ERROR(write_list(list_file));
    if (stop) break;
  }
  if (overflows_ > 0)
    return Status(ErrorCode::kIo, "the fanotify queue overflowed " + std::to_string(overflows_) + " times: the list misses opens");
  return Status();
}

}  // namespace lazycache::cli
