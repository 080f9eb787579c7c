// SPDX-License-Identifier: MIT
// File: tests/hostile/hostile_cases.h -- the corpus of hostile archives, generated (never
// checked in as binaries): each case says what it attacks and where lazycache must refuse it.
// Used by hostile_archive_test (in-process) and lc-make-hostile (writes the files for the CLI
// test, tests/hostile/hostile_cli_test.sh).
#pragma once

#include <string>
#include <vector>

namespace lazycache::hostile {

enum class RefuseAt {
  kOpen,     // ArchiveReader::open (or ls/info/verify/extract on the file) must fail
  kRead,     // opens, but reading file data (cat, extract, verify, a mount read) must fail
  kExtract,  // a valid archive whose extraction must be refused (unsafe on disk)
  kNever,    // valid and safe: must be handled without crash, escape or unbounded memory
};

struct HostileCase {
  std::string name;    // file-name stem, e.g. "name_dotdot"
  std::string attack;  // one line: what it tries
  RefuseAt refuse_at = RefuseAt::kOpen;
  std::string reason;  // substring the error message must contain (case-insensitive)
  std::string entry;   // entry name the message should name; empty when no single entry applies
  std::string bytes;   // the archive object
};

// Builds every case. Deterministic. Aborts the test binary (via a thrown std::runtime_error)
// only if the forge itself fails, which is a bug in the test tools.
std::vector<HostileCase> make_hostile_cases();

const char* refuse_at_name(RefuseAt r);

}  // namespace lazycache::hostile
