// SPDX-License-Identifier: MIT
#include "tools/archive_input.h"

namespace lazycache::cli {

void add_archive_input_options(ArgParser& /*args*/) {}

Result<ArchiveInput> open_archive_input(const ArgParser& args) {
  const auto& pos = args.positionals();
  if (pos.empty()) return Status(ErrorCode::kInvalidArgument, "no archive given (see --help)");
  LC_ASSIGN_OR_RETURN(auto source, LocalFileSource::open(pos[0]));
  LC_ASSIGN_OR_RETURN(auto reader, format::ArchiveReader::open(std::shared_ptr<const ByteSource>(std::move(source))));
  return ArchiveInput{std::move(reader), std::vector<std::string>(pos.begin() + 1, pos.end())};
}

}  // namespace lazycache::cli
