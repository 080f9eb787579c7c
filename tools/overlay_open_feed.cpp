// SPDX-License-Identifier: MIT
#include "tools/overlay_open_feed.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <future>
#include <iostream>
#include <optional>
#include <string_view>

#include "common/helper_process.h"
#include "tools/fanotify_tracer.h"

namespace lazycache::cli {
namespace {

// The helper's conversation on its socket (stream; every path ends with a NUL, which no path holds):
//   daemon -> helper: the mount points, then an empty one (the request's end); later one
//                     kFlush per flush(); the end of the stream asks the helper to stop.
//   helper -> daemon: kReady once it follows, or kError + message (then it exits); then kOpen +
//                     path per open under the mount points, and kFlush once the events queued
//                     before a flush request were sent.
constexpr const char* kRequestVariable = "LAZYCACHE_INTERNAL_OPEN_FEED";
constexpr char kReady = 'R', kError = 'E', kOpen = 'O', kFlush = 'F';
constexpr int kHelperFailed = 1;
constexpr auto kStopWait = std::chrono::seconds(2);

bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// The helper's side: runs before the program's main() when the request variable is set, and exits.
[[gnu::constructor]] void follow_if_requested() {
  if (!become_helper(kRequestVariable, "lazycache-opens", kHelperFailed)) return;
  // Read a byte at a time: the request is short, and nothing after its end may be consumed here.
  std::vector<std::string> mountpoints;
  std::string field;
  while (true) {
    char c;
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(kHelperFailed);
    if (c != '\0') {
      field += c;
      continue;
    }
    if (field.empty()) break;
    mountpoints.push_back(std::move(field));
    field.clear();
  }
  auto tracer = FanotifyTracer::open(mountpoints);
  if (!tracer.ok()) {
    send_all(STDOUT_FILENO, std::string(1, kError) + tracer.error().to_string() + '\0');
    ::_exit(kHelperFailed);
  }
  if (!send_all(STDOUT_FILENO, std::string_view(&kReady, 1))) ::_exit(kHelperFailed);
  std::string message;
  auto on_event = [&](const std::string& path, const FileEvent& e) {
    if (!e.opened) return;
    message.assign(1, kOpen);
    message += path;
    message += '\0';
    if (!send_all(STDOUT_FILENO, message)) ::_exit(kHelperFailed);  // the daemon is gone
  };
  auto on_control = [&] {
    char buf[256];
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) return false;  // asked to stop (or the daemon is gone)
    std::string answers;
    for (ssize_t i = 0; i < n; ++i)
      if (buf[i] == kFlush) answers += kFlush;
    return send_all(STDOUT_FILENO, answers);
  };
  const Status s = tracer->follow(STDIN_FILENO, on_event, on_control);
  if (!s.ok()) send_all(STDOUT_FILENO, std::string(1, kError) + s.to_string() + '\0');
  ::_exit(s.ok() ? 0 : kHelperFailed);
}

// The archive entry of an open under one of `roots`, or none.
std::optional<format::EntryId> entry_of(const fs::Filesystem& fs, const std::vector<OverlayOpenFeed::Root>& roots, std::string_view path) {
  for (const OverlayOpenFeed::Root& r : roots) {
    if (path.size() <= r.mountpoint.size() + 1 || path.compare(0, r.mountpoint.size(), r.mountpoint) != 0 ||
        (r.mountpoint != "/" && path[r.mountpoint.size()] != '/'))
      continue;
    const std::string_view rel = path.substr(r.mountpoint == "/" ? 1 : r.mountpoint.size() + 1);
    return fs.index().lookup_path(r.archive_root.empty() ? std::string(rel) : r.archive_root + "/" + std::string(rel));
  }
  return std::nullopt;
}

}  // namespace

Result<std::unique_ptr<OverlayOpenFeed>> OverlayOpenFeed::start(fs::Filesystem& fs, std::vector<Root> roots) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return errno_status("socketpair for the open feed");
  std::unique_ptr<OverlayOpenFeed> feed(new OverlayOpenFeed());
  feed->socket_ = UniqueFd(fds[0]);
  UniqueFd helper_end(fds[1]);
  std::promise<Status> started;
  std::future<Status> started_result = started.get_future();
  OverlayOpenFeed* self = feed.get();
  // The helper is started from the feed's thread: it dies with the thread that started it.
  feed->thread_ = std::jthread(
      [&fs, self, roots = std::move(roots), helper_end = std::move(helper_end), started = std::move(started)]() mutable {
        self->helper_ = spawn_helper(kRequestVariable, "lazycache-open-feed", helper_end.get());
        helper_end = UniqueFd();
        if (self->helper_ < 0) {
          {
            std::lock_guard lock(self->mu_);
            self->ended_ = true;  // nothing for the destructor to wait for
          }
          started.set_value(Status(ErrorCode::kIo, "cannot start the open feed's process"));
          return;
        }
        std::string request;
        for (const Root& r : roots) request += r.mountpoint + '\0';
        request += '\0';
        char first = 0;
        ssize_t n = send_all(self->socket_.get(), request) ? ::recv(self->socket_.get(), &first, 1, 0) : -1;
        if (n == 1 && first == kReady) {
          started.set_value(Status());
          self->receive(fs, roots);
        } else {
          std::string why;
          char c;
          while (first == kError && ::recv(self->socket_.get(), &c, 1, 0) == 1 && c != '\0') why += c;
          started.set_value(Status(ErrorCode::kIo, why.empty() ? "the open feed's process ended before it followed" : why));
        }
        // Waited for without reaping it first: until ended_ is set its pid is still its own, and the
        // destructor may kill it.
        siginfo_t info;
        while (::waitid(P_PID, static_cast<id_t>(self->helper_), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {}
        {
          std::lock_guard lock(self->mu_);
          self->ended_ = true;
          self->changed_.notify_all();
        }
        int ignored;
        while (::waitpid(self->helper_, &ignored, 0) < 0 && errno == EINTR) {}
      });
  if (Status s = started_result.get(); !s.ok()) return s;  // the destructor joins the thread
  return feed;
}

void OverlayOpenFeed::receive(fs::Filesystem& fs, const std::vector<Root>& roots) {
  std::string pending;  // a message cut by the end of a read
  char buf[64 << 10];
  while (true) {
    const ssize_t n = ::recv(socket_.get(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    pending.append(buf, static_cast<size_t>(n));
    size_t at = 0;
    while (at < pending.size()) {
      if (pending[at] == kFlush) {
        ++at;
        std::lock_guard lock(mu_);
        ++flushes_;
        changed_.notify_all();
        continue;
      }
      const size_t end = pending.find('\0', at);
      if (end == std::string::npos) break;
      const std::string_view body(pending.data() + at + 1, end - at - 1);
      if (pending[at] == kOpen) {
        if (auto id = entry_of(fs, roots, body)) fs.note_open(*id);
      } else if (pending[at] == kError) {
        std::cerr << "lazycache: following the job's opens: " << body << " (the next save's access list may miss files)\n";
      }
      at = end + 1;
    }
    pending.erase(0, at);
  }
}

void OverlayOpenFeed::flush() {
  std::unique_lock lock(mu_);
  if (ended_) return;
  const uint64_t target = flushes_ + 1;
  if (!send_all(socket_.get(), std::string_view(&kFlush, 1))) return;
  changed_.wait_for(lock, std::chrono::seconds(1), [&] { return ended_ || flushes_ >= target; });
}

OverlayOpenFeed::~OverlayOpenFeed() {
  ::shutdown(socket_.get(), SHUT_WR);  // the helper sends what was queued, then ends
  {
    std::unique_lock lock(mu_);
    if (!changed_.wait_for(lock, kStopWait, [&] { return ended_; }) && helper_ > 0) ::kill(helper_, SIGKILL);
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace lazycache::cli
