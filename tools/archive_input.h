// SPDX-License-Identifier: MIT
// File: tools/archive_input.h -- how ls, cat, info, verify and extract open the archive they
// work on. Today: the first positional argument is a local archive file. One function on
// purpose, so that store entries (--store URL --key K) can be added here alone.
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
// Errors: kInvalidArgument (no archive given), kNotFound, kCorrupt, kUnsupported, kIo.
Result<ArchiveInput> open_archive_input(const ArgParser& args);

}  // namespace lazycache::cli
