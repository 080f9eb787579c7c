// SPDX-License-Identifier: MIT
#include "fs/tree_warmer.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <utility>

#include "fs/tree_walk.h"

namespace lazycache::fs {
namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

TreeWarmer::TreeWarmer(std::string mountpoint, uint64_t max_entries, std::vector<std::string> first, TreeWarmHooks hooks, UniqueFd root)
    : mountpoint_(std::move(mountpoint)), max_entries_(max_entries), first_(std::move(first)), hooks_(std::move(hooks)),
      started_ms_(now_ms()), root_(std::move(root)), thread_([this](std::stop_token stop) {
        const bool finished = max_entries_ == 0 || run(stop);
        root_.reset();
        elapsed_ms_ = static_cast<uint64_t>(now_ms() - started_ms_);
        active_ = false;
        if (hooks_.ended) hooks_.ended(finished && !stop.stop_requested());
      }) {}

TreeWarmer::~TreeWarmer() {
  request_stop();
  join();
}

void TreeWarmer::join() {
  if (thread_.joinable()) thread_.join();
}

TreeWarmStats TreeWarmer::stats() const {
  TreeWarmStats s;
  s.entries = entries_.load();
  s.directories = directories_.load();
  s.active = active_.load();
  s.elapsed_ms = s.active ? static_cast<uint64_t>(now_ms() - started_ms_) : elapsed_ms_.load();
  return s;
}

bool TreeWarmer::run(const std::stop_token& stop) {
  {
    std::lock_guard lock(child_mu_);
    if (stop.stop_requested()) {
      root_.reset();
      return false;
    }
    // Started from this thread, which waits for the process below: it dies with this thread.
    const TreeWalkProcess p = spawn_tree_walk({mountpoint_, root_.get(), max_entries_, first_});
    root_.reset();                // the walk holds the mount now, and only while it runs
    if (p.pid < 0) return false;  // the walk only saves lookups: the mount serves without it
    child_ = p.pid;
    socket_ = p.socket;
  }
  std::stop_callback kill_on_stop(stop, [this] {
    std::lock_guard lock(child_mu_);
    if (child_ > 0) ::kill(child_, SIGKILL);
  });
  TreeWalkEvent event;
  size_t have = 0;  // bytes of `event` read so far: a stream may split a record
  while (true) {
    const ssize_t n = ::recv(socket_, reinterpret_cast<char*>(&event) + have, sizeof event - have, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the process ended (or closed its end: it is ending)
    have += static_cast<size_t>(n);
    if (have < sizeof event) continue;
    have = 0;
    entries_.fetch_add(event.entries, std::memory_order_relaxed);
    directories_.fetch_add(1, std::memory_order_relaxed);
    if (hooks_.listed_directory) hooks_.listed_directory();
  }
  std::lock_guard lock(child_mu_);
  int status = 0;
  while (::waitpid(child_, &status, 0) < 0 && errno == EINTR) {}
  child_ = -1;
  ::close(socket_);
  socket_ = -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == kTreeWalkFinished;
}

}  // namespace lazycache::fs
