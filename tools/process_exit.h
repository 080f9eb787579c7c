// SPDX-License-Identifier: MIT
// File: tools/process_exit.h -- waiting for a process that is not our child to exit, without
// polling: `unmount` waits for the mount daemon this way, so it returns as soon as the daemon has
// written its final figures and gone, not at the next tick of a timer.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>

namespace lazycache::cli {

// Blocks until `pid` has exited (a zombie counts as exited) or `timeout` has passed; true when it
// has exited. `still_same` is called after the wait is set up and says whether `pid` still names
// the process meant (not a reused pid); false counts as exited. Uses a pidfd (Linux >= 5.3), which
// becomes readable at exit; without one, checks `still_same` every 5 ms.
bool wait_for_process_exit(pid_t pid, std::chrono::milliseconds timeout, const std::function<bool()>& still_same);

}  // namespace lazycache::cli
