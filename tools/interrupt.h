// SPDX-License-Identifier: MIT
// File: tools/interrupt.h -- how every command answers Ctrl-C (SIGINT) and SIGTERM: at once, from
// whatever it is blocked in (a store that accepts connections and never answers included), with
// one line that says what was interrupted, and exit code 128 + signal (130 for Ctrl-C).
//
// Nothing a command writes is visible half-done, so exiting at once loses nothing: stores publish
// an entry only when it is complete (a local temporary of a dead process is removed by the next
// save; an S3 multipart upload that was never completed is no entry, and the bucket's
// AbortIncompleteMultipartUpload lifecycle rule reclaims its parts), and `mount` detaches what
// it mounted so far (tools/mount_daemon.h watches the signals itself while it starts).
#pragma once

#include <csignal>
#include <string>

namespace lazycache::cli {

// 128 + signal: 130 for SIGINT, 143 for SIGTERM (what a shell reports for a killed command).
inline constexpr int interrupted_exit_code(int signo) { return 128 + signo; }

// Installs the SIGINT/SIGTERM handler for `command` (called by main before the command runs):
// it writes "lazycache COMMAND: interrupted by SIGINT; stopping" to stderr and _exits.
// Commands that block the signals to wait for them (mount) are unaffected while they block them.
void install_interrupt_handlers(const std::string& command);

// "SIGINT", "SIGTERM", "SIGHUP", else "signal N".
std::string signal_name(int signo);

}  // namespace lazycache::cli
