// SPDX-License-Identifier: MIT
// File: tools/argv_redaction.h -- redact_own_argv(), redact_own_store_env(): take passwords
// and signatures out of this process's command line and environment as /proc shows them.
//
// Anyone on the machine can read /proc/PID/cmdline (ps), and the mount daemon is a fork of
// `lazycache mount` that lives for the whole job: a `--store http://user:pass@host/...?sig=...`
// given on the command line would be on show all that time. The parsed copy of the arguments
// (ArgParser) keeps the full URL; the strings argv points at, which /proc shows, are overwritten
// in place with their redacted form (remote::redact_url). The daemon gets the URL in memory,
// through fork(), never through an exec's argv. What stays visible: the few milliseconds from
// exec to main(), and, until the store is open, /proc/PID/environ (readable by the same user
// only) when the URL came from $LAZYCACHE_STORE; the daemon redacts that too once it serves.
#pragma once

namespace lazycache::cli {

// Call once argv has been copied; argv[0] is left alone. Each argument keeps its length or
// shrinks (NUL-padded); a redacted form longer than the original is cut to fit.
void redact_own_argv(int argc, char** argv);

// The same for the value of $LAZYCACHE_STORE in this process's environment block (getenv()
// then returns the redacted URL too): only once nothing will open the store from it again.
void redact_own_store_env();

}  // namespace lazycache::cli
