// SPDX-License-Identifier: MIT
#include "fs/chunk_cache_check.h"

#include <fcntl.h>
#include <lmdb.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#include "fs/local_files.h"

namespace lazycache::fs {
namespace {

// The child's verdicts (exit codes).
constexpr int kSound = 0;
constexpr int kDamaged = 1;
constexpr int kCannotOpen = 2;  // not damage: permissions, no file
constexpr int kCrashed = 3;

int g_report_fd = -1;          // the child's end of the pipe, for the crash handler
volatile uint64_t g_sink = 0;  // what the walk hashed: keeps the compiler from skipping reads

void say(int fd, const char* text) {
  // The verdict is the exit code; the text only explains it, so a short write is fine.
  if (fd >= 0 && ::write(fd, text, std::strlen(text)) < 0) return;
}

extern "C" void on_crash(int sig) {
  // Async-signal-safe only: the walk hit a wild pointer in a damaged page.
  say(g_report_fd, sig == SIGBUS    ? "reading it crashed with SIGBUS (a page beyond the end of a truncated file?)"
                   : sig == SIGABRT ? "reading it failed an LMDB assertion"
                                    : "reading it crashed (a wild pointer in a damaged page)");
  ::_exit(kCrashed);
}

int fail(int fd, const char* what, int rc) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s: %s", what, mdb_strerror(rc));
  say(fd, buf);
  return rc == EACCES || rc == ENOENT || rc == EAGAIN ? kCannotOpen : kDamaged;
}

// What a table's rows must look like (fs/chunk_cache.cpp writes them): a row of another shape is
// a damaged page LMDB's own code would follow into wild memory. 0 = any size.
struct Shape {
  size_t key_size = 0, value_size = 0;
  bool value_any = true;
};
Shape shape_of(const std::string& table) {
  if (table == "chunks") return {16, 16, false};  // digest -> Row {size, seq}
  if (table == "lru") return {24, 0, false};      // seq + digest -> nothing
  if (table == "meta") return {0, 8, false};      // name -> uint64_t
  return {};
}

// The mapped file, for bounds checks: every key and value must lie inside it.
struct MapBounds {
  const char* begin = nullptr;
  const char* end = nullptr;
  uint64_t pages = 0;  // of the file
  bool holds(const MDB_val& v) const {
    const char* p = static_cast<const char*>(v.mv_data);
    return v.mv_size == 0 || (p >= begin && p <= end && v.mv_size <= static_cast<size_t>(end - p));
  }
};

// A freelist row is a count, then that many page numbers: a writer reuses those pages, so a
// damaged one would have it write over the meta pages or outside the file.
bool free_pages_sane(const MDB_val& v, uint64_t pages) {
  if (v.mv_size < sizeof(size_t) || v.mv_size % sizeof(size_t) != 0) return false;
  std::vector<size_t> ids(v.mv_size / sizeof(size_t));
  std::memcpy(ids.data(), v.mv_data, v.mv_size);
  if (ids[0] != ids.size() - 1) return false;
  for (size_t i = 1; i < ids.size(); ++i) {
    if (ids[i] < 2 || ids[i] >= pages) return false;
  }
  return true;
}

// Reads every key and value of table `dbi` (the bytes, not only the pointers), checking that
// each lies inside the file, that keys ascend, and that rows have the table's shape.
int walk_table(int fd, MDB_txn* txn, MDB_dbi dbi, const std::string& what, const MapBounds& map) {
  MDB_cursor* cur = nullptr;
  int rc = mdb_cursor_open(txn, dbi, &cur);
  if (rc != 0) return fail(fd, what.c_str(), rc);
  const Shape shape = shape_of(what);
  MDB_val k, v;
  std::string previous;
  bool first = true;
  uint64_t sum = 0;
  int verdict = kSound;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    const char* problem = nullptr;
    // (The freelist's rows may come from LMDB's own copies, outside the map.)
    if (dbi != 0 && (!map.holds(k) || !map.holds(v))) problem = "a row points outside the file";
    else if (shape.key_size != 0 && k.mv_size != shape.key_size) problem = "a key has the wrong size";
    else if (!shape.value_any && v.mv_size != shape.value_size) problem = "a value has the wrong size";
    if (problem == nullptr && dbi == 0 && !free_pages_sane(v, map.pages)) problem = "it lists pages that do not exist";
    if (problem == nullptr && dbi != 0) {  // the freelist's keys are integers, not memcmp-ordered
      const std::string key(static_cast<const char*>(k.mv_data), k.mv_size);
      if (!first && key <= previous) problem = "keys out of order";
      previous = key;
    }
    if (problem != nullptr) {
      say(fd, (what + ": " + problem).c_str());
      verdict = kDamaged;
      break;
    }
    first = false;
    sum ^= XXH3_64bits(k.mv_data, k.mv_size) ^ XXH3_64bits(v.mv_data, v.mv_size);
  }
  mdb_cursor_close(cur);
  if (verdict == kSound && rc != MDB_NOTFOUND) return fail(fd, what.c_str(), rc);
  g_sink = sum;  // makes the reads real
  return verdict;
}

// Where LMDB mapped `file` in this process (mdb_env_info's me_mapaddr is only set for
// MDB_FIXEDMAP): the mapping of offset 0 of that device and inode in /proc/self/maps.
bool find_mapping(const struct stat& file, const char*& begin) {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return false;
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, maps) != nullptr) {
    unsigned long long start = 0, end = 0, offset = 0, inode = 0;
    unsigned major = 0, minor = 0;
    char perms[8];
    if (std::sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &start, &end, perms, &offset, &major, &minor, &inode) == 7 && offset == 0 &&
        inode == file.st_ino && makedev(major, minor) == file.st_dev) {
      begin = reinterpret_cast<const char*>(static_cast<uintptr_t>(start));
      found = true;
    }
  }
  std::fclose(maps);
  return found;
}

// The child: open read-only, walk the freelist, the main table and every named table in it.
int walk(int fd, const std::string& path, size_t map_size) {
  MDB_env* env = nullptr;
  int rc = mdb_env_create(&env);
  if (rc != 0) return fail(fd, "create environment", rc);
  mdb_env_set_mapsize(env, map_size);
  mdb_env_set_maxreaders(env, 1024);
  mdb_env_set_maxdbs(env, 8);
  rc = mdb_env_open(env, path.c_str(), MDB_NOSUBDIR | MDB_RDONLY | MDB_NOTLS | MDB_NORDAHEAD, 0644);
  if (rc != 0) return fail(fd, "open", rc);
  MDB_envinfo info;
  MDB_stat st;
  struct stat file;
  if (mdb_env_info(env, &info) != 0 || mdb_env_stat(env, &st) != 0 || ::stat(path.c_str(), &file) != 0) return kCannotOpen;
  MapBounds map;
  if (!find_mapping(file, map.begin)) {
    say(fd, "cannot find its mapping in /proc/self/maps");
    return kCannotOpen;
  }
  map.end = map.begin + std::min<uint64_t>(static_cast<uint64_t>(file.st_size), info.me_mapsize);
  map.pages = static_cast<uint64_t>(map.end - map.begin) / st.ms_psize;
  if (static_cast<uint64_t>(info.me_last_pgno + 1) * st.ms_psize > static_cast<uint64_t>(file.st_size)) {
    say(fd, "its pages run past the end of the file (truncated)");
    return kDamaged;
  }
  MDB_txn* txn = nullptr;
  if ((rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn)) != 0) return fail(fd, "begin transaction", rc);
  int verdict = walk_table(fd, txn, 0 /* FREE_DBI: the freelist, walked by every writer */, "freelist", map);
  MDB_dbi main = 0;
  if (verdict == kSound && (rc = mdb_dbi_open(txn, nullptr, 0, &main)) != 0) verdict = fail(fd, "main table", rc);
  if (verdict == kSound) verdict = walk_table(fd, txn, main, "main table", map);
  std::vector<std::string> names;
  MDB_cursor* cur = nullptr;
  if (verdict == kSound && mdb_cursor_open(txn, main, &cur) == 0) {
    MDB_val k, v;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
      names.emplace_back(static_cast<const char*>(k.mv_data), k.mv_size);
    }
    mdb_cursor_close(cur);
  }
  for (const std::string& name : names) {
    if (verdict != kSound) break;
    if (name != "chunks" && name != "lru" && name != "meta") {
      say(fd, "the main table names a table the cache never creates");
      verdict = kDamaged;
      break;
    }
    MDB_dbi dbi = 0;
    if ((rc = mdb_dbi_open(txn, name.c_str(), 0, &dbi)) != 0) verdict = fail(fd, name.c_str(), rc);
    else verdict = walk_table(fd, txn, dbi, name, map);
  }
  mdb_txn_abort(txn);
  mdb_env_close(env);
  return verdict;
}

// The child's side. The walk runs in a fresh image of this executable (posix_spawn of
// /proc/self/exe), not in a forked copy of the caller: a forked child of a process with other
// threads inherits every lock they held at the fork, and the walk allocates. ASan's allocator
// (GCC 12's does not lock around fork) left such a child waiting forever, and the timeout then
// set a sound index aside (writable_incremental_save_test, a clean-clone CI run; the daemon and
// unmount --save both run threads when they open the cache). Any executable that links this
// file can be the child: the request comes in the environment, and this constructor runs the
// walk before the program's main() and exits. The verdict goes to standard output (the pipe).
constexpr const char* kRequestVariable = "LAZYCACHE_INTERNAL_INDEX_CHECK";  // "MAPSIZE:PATH"

[[gnu::constructor]] void walk_if_requested() {
  const char* request = std::getenv(kRequestVariable);
  if (request == nullptr) return;
  char* rest = nullptr;
  const unsigned long long map_size = std::strtoull(request, &rest, 10);
  if (rest == nullptr || *rest != ':') ::_exit(kCannotOpen);
  g_report_fd = STDOUT_FILENO;
  struct sigaction sa {};
  sa.sa_handler = on_crash;
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) ::sigaction(sig, &sa, nullptr);
  ::_exit(walk(STDOUT_FILENO, rest + 1, static_cast<size_t>(map_size)));
}

// Starts the child with its standard output on `report_fd`, standard input and error on
// /dev/null (LMDB's assertions print to stderr: the parent gives the one warning). -1 when it
// cannot be started.
pid_t spawn_walk(const std::string& path, size_t map_size, int report_fd) {
  // The child needs no credentials or settings of the caller: only the request, and the
  // sanitizers' options of a test build.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view var(*e);
    const auto name_end = var.find('=');
    if (name_end != std::string_view::npos && var.substr(0, name_end).ends_with("SAN_OPTIONS")) env_strings.emplace_back(var);
  }
  env_strings.push_back(std::string(kRequestVariable) + "=" + std::to_string(map_size) + ":" + path);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string arg0 = "lazycache-index-check";
  char* argv[] = {arg0.data(), nullptr};

  posix_spawn_file_actions_t actions;
  if (::posix_spawn_file_actions_init(&actions) != 0) return -1;
  ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, report_fd, STDOUT_FILENO);
  ::posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

}  // namespace

IndexCheck check_index(const std::string& path, size_t map_size, std::chrono::milliseconds limit) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || st.st_size == 0) return {};  // none yet: LMDB creates it
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {};  // cannot check: open as before
  const pid_t pid = spawn_walk(path, map_size, fds[1]);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return {};
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool timed_out = false;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  char buf[512];
  const ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  const std::string said = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  IndexCheck out;
  if (timed_out) {
    out.damaged = true;
    out.problem = "walking it did not finish in " + std::to_string(limit.count() / 1000) + " s";
  } else if (WIFSIGNALED(status)) {
    out.damaged = true;
    out.problem = "reading it killed the checking process (signal " + std::to_string(WTERMSIG(status)) + ")";
  } else if (WIFEXITED(status) && (WEXITSTATUS(status) == kDamaged || WEXITSTATUS(status) == kCrashed)) {
    out.damaged = true;
    out.problem = said.empty() ? "LMDB refused it" : said;
  }
  return out;
}

std::string identity_of(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%llu %llu %lld %lld.%09ld %lld.%09ld\n", static_cast<unsigned long long>(st.st_dev),
                static_cast<unsigned long long>(st.st_ino), static_cast<long long>(st.st_size), static_cast<long long>(st.st_mtim.tv_sec),
                st.st_mtim.tv_nsec, static_cast<long long>(st.st_ctim.tv_sec), st.st_ctim.tv_nsec);
  return buf;
}

bool checked_before(const std::string& path) {
  const std::string now = identity_of(path);
  if (now.empty()) return false;
  auto marker = read_whole_file(path + ".checked", 4096);
  return marker.ok() && *marker == now;
}

void mark_checked(const std::string& path, const std::string& before) {
  if (before.empty() || identity_of(path) != before) return;
  // No marker (a failed write) only means the next open walks again.
  ignore_error(replace_file(path + ".checked", before), "a missing marker costs a walk, nothing else");
}

void OwnWritesWatch::trust_from_now() {
  std::lock_guard lock(mu_);
  last_ = identity_of(path_);
  trusted_ = !last_.empty();
  foreign_ = false;
}

void OwnWritesWatch::before_commit() {
  std::lock_guard lock(mu_);
  if (trusted_ && !foreign_ && identity_of(path_) != last_) foreign_ = true;
}

void OwnWritesWatch::after_commit() {
  std::lock_guard lock(mu_);
  if (trusted_ && !foreign_) last_ = identity_of(path_);
}

void OwnWritesWatch::mark_if_only_own() {
  std::lock_guard lock(mu_);
  if (trusted_ && !foreign_) mark_checked(path_, last_);  // mark_checked: only if still last_
}

Status set_index_aside(const std::string& dir) {
  const std::string index = dir + "/index.mdb";
  ::unlink((index + ".checked").c_str());
  if (::rename(index.c_str(), (index + ".damaged").c_str()) != 0 && errno != ENOENT) {
    return errno_status("chunk cache: moving the damaged " + index + " aside");
  }
  // The lock file describes the old file's readers and transactions; the new index needs its own.
  if (::unlink((index + "-lock").c_str()) != 0 && errno != ENOENT) return errno_status("chunk cache: remove " + index + "-lock");
  return Status();
}

}  // namespace lazycache::fs
