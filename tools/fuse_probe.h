// SPDX-License-Identifier: MIT
// File: tools/fuse_probe.h -- can this process mount a FUSE filesystem right now?
//
// `restore --mode auto` and `mount` ask this before trying to mount, so that a runner without
// FUSE (no /dev/fuse, a container without the device or the mount permission, no fusermount3
// for a non-root user) gets a clear reason and `restore` can extract instead of failing midway.
//
// The checks, in order; the first that fails is the reason:
//  1. the device exists, is the FUSE character device (10:229, not something bind-mounted over
//     it such as /dev/null) and opens read-write;
//  2. the kernel lists the "fuse" filesystem type (/proc/filesystems);
//  3. the permission to mount: with CAP_SYS_ADMIN libfuse calls mount(2) itself, and
//     `trial_mount` then proves it with a real mount of an empty FUSE filesystem on a temp
//     directory that is detached again at once (AppArmor or seccomp can refuse mount(2) even to
//     root in a container); without the capability libfuse needs fusermount3 in PATH, owned by
//     root, set-uid, and a process that may gain privileges (no_new_privs clear).
#pragma once

#include <string>

#include "common/status.h"

namespace lazycache::cli {

struct FuseProbeOptions {
  // The device libfuse opens. Only tests and `doctor --device` change it.
  std::string device = "/dev/fuse";
  // Where to look for fusermount3; empty means the PATH environment variable.
  std::string search_path;
  // Prove the mount permission with a real mount + detach (only when the process has
  // CAP_SYS_ADMIN; costs a mount and an unmount, well under a millisecond).
  bool trial_mount = true;
};

struct FuseProbeResult {
  bool usable = false;
  // Empty when usable; otherwise one sentence naming what failed and where, e.g.
  // "/dev/fuse is not the FUSE device (char 1:3; something is bind-mounted over it)".
  std::string reason;
  // How a mount would be done: "mount(2)" (CAP_SYS_ADMIN) or "fusermount3 at /usr/bin/...".
  std::string method;
};

// Runs the checks above. Never throws, never leaves a mount or a temp directory behind; safe to
// call from any thread (it touches no shared state beyond the temp directory it creates).
FuseProbeResult probe_fuse(const FuseProbeOptions& options = {});

// Whether a user other than root may mount with allow_other (`mount --allow-other`): fusermount3
// allows it only when `fuse_conf` has an uncommented `user_allow_other` line. OK as root. Else
// kPermissionDenied saying so and how to fix it (libfuse's own failure reads like a missing device).
Status check_allow_other(bool as_root, const std::string& fuse_conf = "/etc/fuse.conf");

// Full path of `name` in the colon-separated `search_path`, or "" when absent or not executable.
std::string find_in_path(const std::string& name, const std::string& search_path);

}  // namespace lazycache::cli
