// SPDX-License-Identifier: MIT
#include "tools/mount_daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "common/posix_files.h"
#include "tools/command.h"
#include "tools/interrupt.h"
#include "tools/mount_state.h"
#include "tools/run_files.h"

namespace lazycache::cli {
namespace {

// Raised by the daemon itself when one of its mounts ends (unmounted from outside), so serve()
// writes the final figures and exits at once instead of at its next 500 ms state rewrite: that
// wait was all of an idle `lazycache unmount`'s 0.5 s.
constexpr int kMountEndedSignal = SIGUSR2;

// The signals that stop a mount: Ctrl-C, kill, a closed terminal.
sigset_t interrupt_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

// What serve() waits for: those, and its own two.
sigset_t stop_signals() {
  sigset_t set = interrupt_signals();
  sigaddset(&set, SIGUSR1);  // "write your figures now" (status, unmount)
  sigaddset(&set, kMountEndedSignal);
  sigaddset(&set, kStopTreeWarmSignal);
  return set;
}

// Parent side: copy the child's output until both pipes close, then take its status byte and
// return it. A signal (blocked here, so taken with sigtimedwait between polls) goes on to the
// child, which stops at once (its startup watcher); the parent exits 128 + signal when it is gone,
// or after 2 s with a SIGKILL.
int relay_child_startup(int out_fd, int err_fd, int status_fd, pid_t child) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  int open_count = 2;
  char buf[4096];
  const sigset_t interrupts = interrupt_signals();
  int interrupted = 0;
  auto interrupted_at = std::chrono::steady_clock::now();
  while (open_count > 0) {
    timespec none{0, 0};
    if (int sig = ::sigtimedwait(&interrupts, nullptr, &none); sig > 0 && !interrupted) {
      interrupted = sig;
      interrupted_at = std::chrono::steady_clock::now();
      ::kill(child, sig);
    }
    if (interrupted && std::chrono::steady_clock::now() - interrupted_at > std::chrono::seconds(2)) {
      ::kill(child, SIGKILL);
      break;
    }
    int ready = ::poll(fds, 2, 100);
    if (ready == 0) continue;
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        ssize_t ignored = ::write(i == 0 ? STDOUT_FILENO : STDERR_FILENO, buf, static_cast<size_t>(n));
        (void)ignored;
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  if (interrupted) {
    std::cerr << "lazycache mount: interrupted by " << signal_name(interrupted) << " while starting; stopped\n";
    std::_Exit(interrupted_exit_code(interrupted));
  }
  unsigned char code = 0;
  ssize_t n;
  while ((n = ::read(status_fd, &code, 1)) < 0 && errno == EINTR) {}
  ::close(status_fd);
  if (n != 1) {
    std::cerr << "lazycache mount: the mount daemon (pid " << child << ") exited during startup; see " << run_dir() << "/mount-" << child
              << ".log\n";
    return 1;
  }
  return code;
}

}  // namespace

// Until ready(): waits for SIGINT/SIGTERM/SIGHUP (blocked in every thread, so only this
// thread's signalfd takes them) and on one detaches the noted mounts and exits 128 + signal.
// ready() wakes it through an eventfd and joins it at once: the wait has no timeout to run out
// (it was a 100 ms sigtimedwait, so every mount waited up to 100 ms, 50 on average, in ready()).
struct Daemonizer::StartupWatch {
  std::mutex mu;
  std::vector<std::string> mounted;  // guarded by mu
  UniqueFd wake;                     // eventfd: written by stop()
  std::jthread thread;

  Status start() {
    const sigset_t set = interrupt_signals();
    UniqueFd signals(::signalfd(-1, &set, SFD_CLOEXEC));
    if (!signals.valid()) return errno_status("signalfd for the startup watcher");
    wake = UniqueFd(::eventfd(0, EFD_CLOEXEC));
    if (!wake.valid()) return errno_status("eventfd for the startup watcher");
    thread = std::jthread([this, signals = std::move(signals)] {
      pollfd fds[2] = {{signals.get(), POLLIN, 0}, {wake.get(), POLLIN, 0}};
      for (;;) {
        if (::poll(fds, 2, -1) < 0) {
          if (errno == EINTR) continue;
          return;  // cannot watch: signals stay pending for serve()
        }
        if (fds[1].revents != 0) return;  // stop()
        signalfd_siginfo info{};
        if (::read(signals.get(), &info, sizeof(info)) != static_cast<ssize_t>(sizeof(info))) continue;
        const int sig = static_cast<int>(info.ssi_signo);
        std::lock_guard lock(mu);
        std::cerr << "lazycache mount: interrupted by " << signal_name(sig) << " while starting"
                  << (mounted.empty() ? "; nothing was mounted" : "; detaching what was mounted") << "\n";
        for (const auto& m : mounted)
          ignore_error(unmount_path(m, /*lazy=*/true), "exiting anyway; a stale mount is cleaned by the next mount");
        std::cerr.flush();
        std::_Exit(interrupted_exit_code(sig));
      }
    });
    return Status();
  }

  void stop() {
    const uint64_t one = 1;
    ssize_t ignored = ::write(wake.get(), &one, sizeof(one));
    (void)ignored;
    if (thread.joinable()) thread.join();
  }
};

void Daemonizer::note_mounted(const std::string& mountpoint) {
  if (!watch_) return;
  std::lock_guard lock(watch_->mu);
  watch_->mounted.push_back(mountpoint);
}

Result<Daemonizer> Daemonizer::start(bool foreground) {
  sigset_t set = stop_signals();
  sigset_t caller_mask;
  pthread_sigmask(SIG_BLOCK, &set, &caller_mask);
  ::signal(SIGPIPE, SIG_IGN);
  Daemonizer d;
  d.watch_ = std::make_shared<StartupWatch>();
  if (foreground) {
    LC_RETURN_IF_ERROR(d.watch_->start());
    return d;
  }
  LC_RETURN_IF_ERROR(make_run_dir().with_context("creating the run directory"));
  int out[2], err[2], st[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(st, O_CLOEXEC) != 0) {
    return errno_status("pipe");
  }
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return errno_status("fork");
  if (pid > 0) {
    ::close(out[1]);
    ::close(err[1]);
    ::close(st[1]);
    d.watch_.reset();
    const int code = relay_child_startup(out[0], err[0], st[0], pid);
    // Mounted: nothing is left to do here, and the step goes on at once (no exit-time work).
    if (code == kExitOk) std::_Exit(kExitOk);
    // Failed: the caller goes on in this process (restore extracts instead), as interruptible as
    // it was before.
    d.parent_exit_code_ = code;
    pthread_sigmask(SIG_SETMASK, &caller_mask, nullptr);
    return d;
  }
  ::close(out[0]);
  ::close(err[0]);
  ::close(st[0]);
  ::setsid();
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull >= 0) {
    ::dup2(devnull, STDIN_FILENO);
    ::close(devnull);
  }
  ::dup2(out[1], STDOUT_FILENO);
  ::dup2(err[1], STDERR_FILENO);
  ::close(out[1]);
  ::close(err[1]);
  d.status_fd_ = st[1];
  if (Status s = d.watch_->start(); !s.ok()) {  // in the child: the fork above copied no thread
    std::cerr << "lazycache mount: " << s.to_string() << "\n";
    std::_Exit(kExitFailure);
  }
  return d;
}

void Daemonizer::ready(int exit_code) {
  if (watch_) {
    watch_->stop();
    watch_.reset();
    if (exit_code != kExitOk) {
      const sigset_t set = interrupt_signals();
      pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    }
  }
  if (status_fd_ < 0) return;
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const std::string log = run_dir() + "/mount-" + std::to_string(::getpid()) + ".log";
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, kRunFileMode);
  if (fd >= 0) ::fchmod(fd, kRunFileMode);  // a log left by an earlier daemon of this pid
  if (fd < 0) fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  ::dup2(fd, STDOUT_FILENO);
  ::dup2(fd, STDERR_FILENO);
  ::close(fd);
  unsigned char code = static_cast<unsigned char>(exit_code);
  ssize_t ignored = ::write(status_fd_, &code, 1);
  (void)ignored;
  ::close(status_fd_);
  status_fd_ = -1;
  // A failed startup ends the daemon here: the waiting command got the code and goes on (restore
  // falls back to extracting in that process, where the user's step waits for it), so nothing
  // may go on in this detached one.
  if (exit_code != kExitOk) std::_Exit(exit_code);
}

Status announce_mounts(const std::vector<std::string>& mountpoints, const ServeInfo& info) {
  DaemonState state;
  state.pid = ::getpid();
  state.start_ticks = process_start_ticks(state.pid).value_or(0);
  state.archive = info.archive;
  state.key = info.key;
  state.mountpoints = mountpoints;
  LC_RETURN_IF_ERROR(make_run_dir());
  return write_run_file(run_dir() + "/mount-" + std::to_string(state.pid) + ".state", state.to_text());
}

int serve(fs::Filesystem& filesystem, std::vector<std::unique_ptr<fs::FuseMount>>& mounts,
          std::vector<std::unique_ptr<fs::TreeWarmer>>& warmers, const ServeInfo& info, const std::function<void()>& before_access_list) {
  DaemonState state;
  state.pid = ::getpid();
  state.start_ticks = process_start_ticks(state.pid).value_or(0);
  state.archive = info.archive;
  state.key = info.key;
  for (const auto& m : mounts) state.mountpoints.push_back(m->mountpoint());
  const std::string base = run_dir() + "/mount-" + std::to_string(state.pid);
  ignore_error(make_run_dir(), "the state write below reports it");
  // The walks' figures, kept once the walks are gone (the final figures still report them).
  std::vector<fs::TreeWarmStats> ended_walks;
  auto write_state = [&] {
    ++state.seq;
    state.stats = filesystem.stats();
    for (const auto& m : mounts) {
      const fs::RequestSnapshot r = m->requests();
      for (size_t i = 0; i < r.size(); ++i) state.stats.requests[i] += r[i];
    }
    std::vector<fs::TreeWarmStats> walks = ended_walks;
    for (const auto& w : warmers) walks.push_back(w->stats());
    for (const fs::TreeWarmStats& t : walks) {
      state.stats.warm_entries += t.entries;
      state.stats.warm_directories += t.directories;
      state.stats.warm_ms = std::max(state.stats.warm_ms, t.elapsed_ms);
      if (t.active) state.stats.warm_active = 1;
    }
    Status s = write_run_file(base + ".state", state.to_text());
    if (!s.ok()) std::cerr << "lazycache: cannot write mount state: " << s.to_string() << "\n";
  };
  write_state();

  auto write_access = [&filesystem, &before_access_list](const std::string& file) {
    if (before_access_list) before_access_list();
    std::string access;
    for (format::EntryId id : filesystem.access_order()) access += filesystem.index().path(id) + "\n";
    ignore_error(write_run_file(file, access), "the hot list is an optimisation");
  };
  const sigset_t set = stop_signals();
  // One waiter per mount: the signal wakes the sigtimedwait below (every thread blocks it, so
  // it stays pending for that call). Joined before return: each ends once its mount has.
  std::vector<std::jthread> waiters;
  for (auto& m : mounts) {
    waiters.emplace_back([mount = m.get()] {
      mount->wait();
      ::kill(::getpid(), kMountEndedSignal);
    });
  }
  bool stopping = false;
  while (true) {
    bool all_done = true;
    for (const auto& m : mounts) all_done = all_done && m->finished();
    if (all_done) break;
    timespec wait{0, 500 * 1000 * 1000};
    siginfo_t si;
    int sig = ::sigtimedwait(&set, &si, &wait);
    // An unmount found the walk's directory open (EBUSY): end the walk, the unmount tries again.
    if (sig == kStopTreeWarmSignal) {
      for (auto& w : warmers) w->request_stop();
    }
    if (sig > 0 && sig != SIGUSR1 && sig != kMountEndedSignal && sig != kStopTreeWarmSignal && !stopping) {
      std::cerr << "lazycache: signal " << sig << ": unmounting\n";
      stopping = true;
      // The walks first, while the mounts still answer their requests.
      for (auto& w : warmers) w->request_stop();
      for (auto& w : warmers) w->join();
      for (auto& m : mounts) m->stop();
    }
    // A refresh (status, unmount --save) gets the access list as of now, before the state's
    // sequence number moves on: the live copy is otherwise up to a second old, and the files a
    // job read in its last second would be missing from the next save's hot list.
    if (sig == SIGUSR1) write_access(base + ".access.live");
    write_state();
  }
  // Every mount point is gone, so no new request can arrive: the figures are final, and the fill
  // not yet started is dropped now, so exiting waits at most for the fill runs in flight.
  filesystem.stop_fill();
  waiters.clear();
  for (auto& w : warmers) w->join();  // a walk still going gets ENOTCONN from the ended mount and stops
  for (const auto& w : warmers) ended_walks.push_back(w->stats());
  warmers.clear();
  write_access(base + ".access");
  state.stopped = true;
  write_state();
  // A read still waiting (its reader killed mid-read) replies on its session: let it finish first.
  while (filesystem.reads_in_flight() > 0) ::usleep(10000);
  // Nothing waits for the store now but the fill's runs already in flight: end them, so that
  // the exit (and the unmount waiting for it) does not wait for their last bytes.
  filesystem.cancel_store_reads();
  mounts.clear();
  return 0;
}

}  // namespace lazycache::cli
