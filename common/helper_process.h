// SPDX-License-Identifier: MIT
// File: common/helper_process.h -- a helper process of the mount daemon: a fresh image of this
// executable, killed with the thread that started it, talking over one socket.
//
// Why a process and not a thread: a helper that sends requests to the daemon's own FUSE mount
// (the tree walk at mount, fs/tree_walk.h; the kernel overlay's open feed,
// tools/overlay_open_feed.h) must not be one of the daemon's threads. A SIGKILL of the daemon
// while one of its requests was being handled leaves such a thread waiting in the kernel,
// uninterruptibly, for an answer only the dead process could give; the process never finishes
// dying, /dev/fuse is never closed and the mount hangs for good. A helper process only waits on
// the daemon: when the daemon dies its device closes, the connection is aborted, the helper's
// request fails, and PR_SET_PDEATHSIG kills the helper.
//
// Why a fresh image (posix_spawn of /proc/self/exe) and not fork(): a forked child of a threaded
// process inherits every lock its other threads held. The child runs its part from a
// [[gnu::constructor]] before main() when the request variable is set; any executable that links
// the helper's file can be the child.
#pragma once

#include <sys/types.h>

namespace lazycache {

// Starts this executable again as a helper: `socket` is its standard input and output, standard
// error is /dev/null, no other descriptor of the caller is inherited (above all not /dev/fuse,
// which would keep a dead daemon's connection open for as long as the helper lives). The
// environment holds `request_variable` (set to the caller's pid) and what a sanitizer build and
// the loader need, nothing else (the daemon's may have held store credentials). Signals are at
// their defaults and unblocked in the child. Returns its pid, or -1 when it could not start.
// The calling thread must outlive the helper's use: the helper dies when that thread ends.
// `pass_fd` (>= 0) is also given to the child, as descriptor 3 (kHelperPassedFd).
pid_t spawn_helper(const char* request_variable, const char* argv0, int socket, int pass_fd = -1);
inline constexpr int kHelperPassedFd = 3;

// In the child, from its constructor: true when this process was started by spawn_helper for
// `request_variable` and its parent is still the process that asked (a parent that died before
// the child armed PR_SET_PDEATHSIG would not kill it: such a child must exit). Arms
// PR_SET_PDEATHSIG and names the process `name` (what `ps` and unmount's busy report show).
// False when the variable is not set: this is not that helper, the program goes on to main().
// Exits the process (code `exit_code_if_orphaned`) when it is set but the parent is gone.
bool become_helper(const char* request_variable, const char* name, int exit_code_if_orphaned);

}  // namespace lazycache
