// SPDX-License-Identifier: MIT
// File: tools/archive_input.h -- how ls, cat, info, verify and extract open the archive they
// work on: the first positional argument as a local archive file, or, with --key K (plus
// --store URL, --restore-keys, --scope), a store entry read through ranged GETs (only the tail
// and the frames the command needs are fetched; all positionals are then command arguments).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "format/archive.h"
#include "tools/command.h"

namespace lazycache::cli {

struct ArchiveInput {
  std::unique_ptr<format::ArchiveReader> reader;
  std::vector<std::string> rest;  // the positionals after the archive argument
};

// Declares the options open_archive_input() reads (call before args.parse()).
void add_archive_input_options(ArgParser& args);

// Opens the archive the command line names and validates its seek table and index.
// Errors: kInvalidArgument (no archive given), kNotFound (file, or no entry for the key),
// kCorrupt, kUnsupported, kIo, and the store's errors.
Result<ArchiveInput> open_archive_input(const ArgParser& args);

}  // namespace lazycache::cli
