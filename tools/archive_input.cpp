// SPDX-License-Identifier: MIT
#include "tools/archive_input.h"

#include "remote/object_byte_source.h"
#include "tools/mount_state.h"
#include "tools/store_options.h"

namespace lazycache::cli {

void add_archive_input_options(ArgParser& args) {
  // --key K (with --store URL, --restore-keys ...) reads a store entry instead of a local file;
  // only the frames the command needs are fetched.
  add_store_options(args, StoreUse::kRead);
  add_key_options(args);
  args.multi("paths", "PATH", "with --key: the entry saved for these paths (default: the key's newest entry, whatever its paths)");
}

namespace {

// A store entry: resolve like restore (exact key, else restore-keys), then open the object with
// one request that brings the tail (seek table + index) along.
Result<std::unique_ptr<format::ArchiveReader>> open_store_entry(const ArgParser& args) {
  LC_ASSIGN_OR_RETURN(auto store, open_store(args));
  std::vector<std::string> saved_paths;
  for (const auto& p : args.get_all("paths")) saved_paths.push_back(absolute_path(p));
  LC_ASSIGN_OR_RETURN(auto entry, resolve_entry(store, args, saved_paths));
  if (!entry.match) {
    std::string why = other_paths_message(entry, store->describe());
    return Status(ErrorCode::kNotFound, why.empty() ? "no entry for key " + entry.primary_key + " in " + store->describe() : why);
  }
  LC_ASSIGN_OR_RETURN(auto source, remote::ObjectByteSource::open(store, entry.match->object.key));
  std::string where = source->describe();
  auto reader = format::ArchiveReader::open(std::shared_ptr<const ByteSource>(std::move(source)));
  if (!reader.ok()) return reader.error().with_context("opening " + where);
  return std::move(reader).value();
}

}  // namespace

Result<ArchiveInput> open_archive_input(const ArgParser& args) {
  const auto& pos = args.positionals();
  if (args.has("key")) {
    LC_ASSIGN_OR_RETURN(auto reader, open_store_entry(args));
    return ArchiveInput{std::move(reader), pos};
  }
  if (pos.empty()) return Status(ErrorCode::kInvalidArgument, "no archive given: a FILE, or --key KEY [--store URL] (see --help)");
  LC_ASSIGN_OR_RETURN(auto source, LocalFileSource::open(pos[0]));
  LC_ASSIGN_OR_RETURN(auto reader, format::ArchiveReader::open(std::shared_ptr<const ByteSource>(std::move(source))));
  return ArchiveInput{std::move(reader), std::vector<std::string>(pos.begin() + 1, pos.end())};
}

}  // namespace lazycache::cli
