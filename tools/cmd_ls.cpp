// SPDX-License-Identifier: MIT
// `lazycache ls ARCHIVE [PATH...]`: list entries, depth-first, from the index alone.
#include <ctime>
#include <iostream>

#include "format/quote.h"
#include "tools/archive_input.h"
#include "tools/command.h"

namespace lazycache::cli {
namespace {

std::string mode_string(const format::Entry& e) {
  std::string s = e.type == format::EntryType::kDirectory ? "d" : e.type == format::EntryType::kSymlink ? "l" : "-";
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s += (e.mode & (0400u >> i)) ? rwx[i] : '-';
  if (e.mode & 04000) s[3] = (e.mode & 0100) ? 's' : 'S';
  if (e.mode & 02000) s[6] = (e.mode & 0010) ? 's' : 'S';
  if (e.mode & 01000) s[9] = (e.mode & 0001) ? 't' : 'T';
  return s;
}

void print_entry(const format::Index& idx, format::EntryId id, bool long_format) {
  format::Entry e = idx.entry(id);
  // A name is the archive's, not ours: a control byte in it must not reach the terminal raw.
  std::string path = format::quote_path_if_needed(idx.path(id) + (e.type == format::EntryType::kDirectory ? "/" : ""));
  if (long_format) {
    char when[32];
    std::time_t t = static_cast<std::time_t>(e.mtime_ns / 1000000000);
    struct tm tm;
    gmtime_r(&t, &tm);
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    std::printf("%s %3u %5u/%-5u %12llu %s %s", mode_string(e).c_str(), e.nlink, e.uid, e.gid, static_cast<unsigned long long>(e.size),
                when, path.c_str());
    if (e.type == format::EntryType::kSymlink) std::printf(" -> %s", format::quote_path_if_needed(e.symlink_target).c_str());
    std::printf("\n");
  } else {
    std::printf("%s\n", path.c_str());
  }
}

int run_ls(ArgParser& args) {
  add_archive_input_options(args);
  args.flag("long", "mode, links, uid/gid, size, mtime (UTC) and symlink targets");
  args.alias("-l", "long");
  int code = 0;
  if (!args.parse(code)) return code;
  auto in = open_archive_input(args);
  if (!in.ok()) return report_error("ls", in.error());
  const format::Index& idx = in->reader->index();
  std::vector<std::string> paths = in->rest.empty() ? std::vector<std::string>{""} : in->rest;
  for (const auto& p : paths) {
    auto start = idx.lookup_path(p);
    if (!start) return report_error("ls", Status(ErrorCode::kNotFound, format::quote_path(p) + " is not in the archive"));
    std::vector<format::EntryId> stack{*start};
    while (!stack.empty()) {
      format::EntryId id = stack.back();
      stack.pop_back();
      if (id != idx.root()) print_entry(idx, id, args.has("long"));
      auto ch = idx.children(id);
      for (uint32_t c = ch.first + ch.count; c-- > ch.first;) stack.push_back(c);
    }
  }
  return kExitOk;
}

const CommandRegistration reg{"ls", "list the entries of an archive", "[OPTIONS] ARCHIVE [PATH...]", run_ls};

}  // namespace
}  // namespace lazycache::cli
