// SPDX-License-Identifier: MIT
// Every hostile archive, in a forked child with a deadline: open it, read every file, extract it
// into CASE/target next to CASE/outside/sentinel. The parent checks where and why it was refused,
// that nothing appeared outside the target, that the child did not hang, and its peak memory.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "format/archive.h"
#include "format/extractor.h"
#include "tests/hostile/archive_forge.h"
#include "tests/hostile/hostile_cases.h"

using namespace lazycache;
using namespace lazycache::format;
using namespace lazycache::hostile;
namespace fs = std::filesystem;

namespace {

constexpr int kDeadlineSeconds = 60;
// Peak RSS a case may add over the parent's: generous for ASan's shadow and the extract
// pipeline's buffers, far below what any bomb here would need (64 MiB to 1 GiB each).
constexpr long kMaxExtraRssKiB = 200 * 1024;

struct Outcome {
  std::string stage;  // "open", "read", "extract" (where it failed) or "ok"
  std::string code;
  std::string message;
  long max_rss_kib = 0;
  bool hung = false;
  bool crashed = false;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

long current_rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

// The work done in the child; returns the line sent to the parent.
std::string run_in_child(const std::string& bytes, const std::string& target) {
  auto reader = ArchiveReader::open(std::make_shared<MemorySource>(bytes, "hostile archive"));
  auto line = [](const char* stage, const Status& s) { return std::string(stage) + "\n" + error_code_name(s.code()) + "\n" + s.message(); };
  if (!reader.ok()) return line("open", reader.error());
  const Index& index = (*reader)->index();
  std::string buf(1 << 20, '\0');
  for (EntryId id = 0; id < index.entry_count(); ++id) {
    Entry e = index.entry(id);
    if (e.type != EntryType::kRegular) continue;
    for (uint64_t off = 0; off < e.size; off += buf.size()) {
      auto n = (*reader)->read_file(id, off, std::as_writable_bytes(std::span<char>(buf)));
      if (!n.ok()) return line("read", n.error());
      if (*n == 0) break;
    }
  }
  ExtractConfig config;
  config.targets = targets_under(index, target);
  config.threads = 2;
  config.warn = [](const std::string&) {};
  auto st = extract_archive(**reader, config);
  if (!st.ok()) return line("extract", st.error());
  return "ok\n\n";
}

Outcome run_case(const HostileCase& c, const std::string& case_dir) {
  fs::create_directories(case_dir + "/target");
  fs::create_directories(case_dir + "/outside");
  std::ofstream(case_dir + "/outside/sentinel") << "untouched\n";
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    alarm(kDeadlineSeconds);
    std::string msg = run_in_child(c.bytes, case_dir + "/target");
    (void)!write(fds[1], msg.data(), msg.size());
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char tmp[4096];
  for (ssize_t n; (n = read(fds[0], tmp, sizeof tmp)) > 0;) msg.append(tmp, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  Outcome o;
  o.max_rss_kib = ru.ru_maxrss;
  if (WIFSIGNALED(status)) {
    o.hung = WTERMSIG(status) == SIGALRM;
    o.crashed = !o.hung;
    o.stage = "signal " + std::to_string(WTERMSIG(status));
    return o;
  }
  size_t a = msg.find('\n'), b = a == std::string::npos ? a : msg.find('\n', a + 1);
  if (b == std::string::npos) {
    o.crashed = true;
    o.stage = "no result (exit " + std::to_string(WEXITSTATUS(status)) + ")";
    return o;
  }
  o.stage = msg.substr(0, a);
  o.code = msg.substr(a + 1, b - a - 1);
  o.message = msg.substr(b + 1);
  return o;
}

// Names directly under `dir`, without following anything.
std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// Removes a tree that may be deeper than PATH_MAX, one directory fd at a time.
void remove_tree_at(int parent_fd, const char* name) {
  int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    unlinkat(parent_fd, name, 0);
    return;
  }
  DIR* d = fdopendir(fd);
  std::vector<std::string> kids;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) kids.emplace_back(e->d_name);
  }
  for (const auto& k : kids) remove_tree_at(dirfd(d), k.c_str());
  closedir(d);
  unlinkat(parent_fd, name, AT_REMOVEDIR);
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/lc-hostile-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { remove_tree_at(AT_FDCWD, path.c_str()); }
};

bool expected_stage(RefuseAt at, const std::string& stage) {
  switch (at) {
    case RefuseAt::kOpen: return stage == "open";
    case RefuseAt::kRead: return stage == "read";
    case RefuseAt::kExtract: return stage == "extract";
    case RefuseAt::kNever: return stage == "ok" || stage == "extract";
  }
  return false;
}

const std::vector<HostileCase>& cases() {
  static const std::vector<HostileCase> all = make_hostile_cases();
  return all;
}

}  // namespace

TEST_CASE("hostile archives: each is refused where it must be, with the reason, nothing escapes", "[unit][hostile]") {
  TempDir tmp;
  REQUIRE(cases().size() >= 20);  // built before the baseline: children inherit it
  const long base_rss = current_rss_kib();
  for (const auto& c : cases()) {
    if (c.name == "deep_nesting") continue;  // its own case below (the slowest to extract)
    SECTION(c.name) {
      const std::string dir = tmp.path + "/" + c.name;
      Outcome o = run_case(c, dir);
      INFO(c.name << ": " << c.attack);
      INFO("outcome: " << o.stage << " " << o.code << ": " << o.message);
      REQUIRE_FALSE(o.hung);
      REQUIRE_FALSE(o.crashed);
      CHECK(expected_stage(c.refuse_at, o.stage));
      if (c.refuse_at == RefuseAt::kOpen || c.refuse_at == RefuseAt::kRead) {
        CHECK((o.code == error_code_name(ErrorCode::kCorrupt) || o.code == error_code_name(ErrorCode::kUnsupported)));
      }
      if (c.refuse_at == RefuseAt::kExtract) CHECK(o.code == error_code_name(ErrorCode::kPermissionDenied));
      if (!c.reason.empty()) CHECK(lower(o.message).find(lower(c.reason)) != std::string::npos);
      // The entry it concerns, by its quoted path, wherever it is refused.
      if (!c.entry.empty() && c.refuse_at != RefuseAt::kNever) CHECK(o.message.find("/" + c.entry + "'") != std::string::npos);
      // Nothing outside the target, the sentinel intact.
      CHECK(names_in(dir) == std::set<std::string>{"outside", "target"});
      CHECK(names_in(dir + "/outside") == std::set<std::string>{"sentinel"});
      CHECK(o.max_rss_kib - base_rss < kMaxExtraRssKiB);
    }
  }
}

TEST_CASE("hostile archives: an existing symlink in the target is never followed", "[unit][hostile]") {
  TempDir tmp;
  ArchiveForge f;
  uint32_t sub = f.add_dir(f.root(), "sub");
  f.add_file(sub, "b.txt", "through the link?\n");
  auto bytes = f.build();
  REQUIRE(bytes.ok());
  const std::string dir = tmp.path + "/pre";
  fs::create_directories(dir + "/target/data");
  fs::create_directories(dir + "/outside");
  std::ofstream(dir + "/outside/sentinel") << "untouched\n";
  fs::create_directory_symlink("../../outside", dir + "/target/data/sub");
  auto reader = ArchiveReader::open(std::make_shared<MemorySource>(*bytes));
  REQUIRE(reader.ok());
  ExtractConfig config;
  config.targets = targets_under((*reader)->index(), dir + "/target");
  config.threads = 1;
  auto r = extract_archive(**reader, config);
  REQUIRE_FALSE(r.ok());
  INFO(r.error().to_string());
  CHECK(r.error().code() == ErrorCode::kPermissionDenied);
  CHECK(r.error().message().find("sub") != std::string::npos);
  CHECK(names_in(dir + "/outside") == std::set<std::string>{"sentinel"});
}

TEST_CASE("hostile archives: the deep tree extracts inside the target", "[unit][hostile]") {
  auto it = std::find_if(cases().begin(), cases().end(), [](const HostileCase& c) { return c.name == "deep_nesting"; });
  REQUIRE(it != cases().end());
  TempDir tmp;
  Outcome o = run_case(*it, tmp.path + "/deep");
  INFO(o.stage << " " << o.code << ": " << o.message);
  REQUIRE_FALSE(o.hung);
  REQUIRE_FALSE(o.crashed);
  CHECK(names_in(tmp.path + "/deep") == std::set<std::string>{"outside", "target"});
  CHECK(names_in(tmp.path + "/deep/outside") == std::set<std::string>{"sentinel"});
  if (o.stage == "ok") {
    // Walk down by fds (the path is longer than PATH_MAX) to the file at the bottom.
    int fd = open((tmp.path + "/deep/target/data").c_str(), O_RDONLY | O_DIRECTORY);
    REQUIRE(fd >= 0);
    int depth = 0;
    for (int next; (next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW)) >= 0; ++depth) {
      close(fd);
      fd = next;
    }
    CHECK(depth == 300);
    CHECK(faccessat(fd, "deep.txt", F_OK, AT_SYMLINK_NOFOLLOW) == 0);
    close(fd);
  } else {
    // Refusing is acceptable if it says why.
    CHECK(!o.message.empty());
  }
}

// The entry's path, quoted (ending with its name and the closing quote) and escaped: no raw
// control byte may reach the message.
TEST_CASE("hostile archives: refusals name the entry by its quoted path", "[unit][hostile]") {
  int named = 0;
  for (const auto& c : cases()) {
    if (c.entry.empty() || c.refuse_at != RefuseAt::kOpen) continue;
    auto r = ArchiveReader::open(std::make_shared<MemorySource>(c.bytes));
    REQUIRE_FALSE(r.ok());
    const std::string& m = r.error().message();
    INFO(c.name << ": " << m);
    CHECK(m.find("/" + c.entry + "'") != std::string::npos);
    CHECK(std::none_of(m.begin(), m.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x20; }));
    ++named;
  }
  CHECK(named >= 12);
}
