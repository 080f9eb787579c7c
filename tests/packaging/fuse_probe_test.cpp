// SPDX-License-Identifier: MIT
// FUSE usability probe: each failing check yields its own reason; on this machine (root with
// /dev/fuse) the real probe says usable and leaves no trial mount or directory behind.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tools/fuse_probe.h"

using lazycache::ErrorCode;
using lazycache::Status;
using lazycache::cli::check_allow_other;
using lazycache::cli::find_in_path;
using lazycache::cli::FuseProbeOptions;
using lazycache::cli::probe_fuse;
namespace fs = std::filesystem;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "lc-probe-test.XXXXXX").string();
    REQUIRE(mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~TempDir() { fs::remove_all(path); }
};

bool is_real_fuse_device(const char* p) {
  struct stat st {};
  return stat(p, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 10 && minor(st.st_rdev) == 229;
}

}  // namespace

TEST_CASE("a missing device is reported as missing, naming the path", "[unit]") {
  TempDir dir;
  FuseProbeOptions o;
  o.device = (dir.path / "no-such-fuse").string();
  auto r = probe_fuse(o);
  CHECK_FALSE(r.usable);
  CHECK(r.reason.find(o.device + " does not exist") == 0);
}

TEST_CASE("a different character device (a bind-mounted /dev/null) is not taken for FUSE", "[unit]") {
  FuseProbeOptions o;
  o.device = "/dev/null";
  auto r = probe_fuse(o);
  CHECK_FALSE(r.usable);
  CHECK(r.reason.find("/dev/null is not the FUSE device (char 1:3") == 0);
}

TEST_CASE("a regular file in place of the device is rejected", "[unit]") {
  TempDir dir;
  std::string f = (dir.path / "fuse").string();
  std::ofstream(f) << "x";
  FuseProbeOptions o;
  o.device = f;
  auto r = probe_fuse(o);
  CHECK_FALSE(r.usable);
  CHECK(r.reason.find("not a character device") != std::string::npos);
}

TEST_CASE("find_in_path finds executables only, in PATH order", "[unit]") {
  TempDir dir;
  fs::create_directories(dir.path / "a");
  fs::create_directories(dir.path / "b");
  std::ofstream(dir.path / "a" / "tool") << "#!/bin/sh\n";  // not executable
  std::ofstream(dir.path / "b" / "tool") << "#!/bin/sh\n";
  fs::permissions(dir.path / "b" / "tool", fs::perms::owner_all);
  std::string search = (dir.path / "a").string() + "::" + (dir.path / "b").string();
  CHECK(find_in_path("tool", search) == (dir.path / "b" / "tool").string());
  CHECK(find_in_path("absent", search).empty());
  CHECK(find_in_path("tool", "").empty());
}

TEST_CASE("on a root machine with /dev/fuse the trial mount succeeds and leaves nothing behind", "[fuse]") {
  if (!is_real_fuse_device("/dev/fuse") || geteuid() != 0) {
    WARN("skipped: needs root and /dev/fuse");
    return;
  }
  TempDir tmp;
  std::string old_tmpdir = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "";
  setenv("TMPDIR", tmp.path.c_str(), 1);
  auto r = probe_fuse();
  if (old_tmpdir.empty()) unsetenv("TMPDIR");
  else setenv("TMPDIR", old_tmpdir.c_str(), 1);
  INFO(r.reason);
  CHECK(r.usable);
  CHECK(r.method == "mount(2)");
  CHECK(fs::is_empty(tmp.path));  // trial mount point removed
  CHECK(read_file("/proc/self/mountinfo").find("lazycache-probe") == std::string::npos);

  FuseProbeOptions no_trial;
  no_trial.trial_mount = false;
  CHECK(probe_fuse(no_trial).usable);
}

TEST_CASE("--allow-other without root needs user_allow_other in fuse.conf, and says so", "[unit]") {
  char tmpl[] = "/tmp/lc-fuseconf-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string conf = std::string(tmpl) + "/fuse.conf";
  CHECK(check_allow_other(/*as_root=*/true, conf).ok());  // root: no file needed
  Status missing = check_allow_other(false, conf);
  CHECK(missing.code() == ErrorCode::kPermissionDenied);
  CHECK(missing.message().find("user_allow_other") != std::string::npos);
  CHECK(missing.message().find(conf) != std::string::npos);
  std::ofstream(conf) << "# user_allow_other\nmount_max = 1000\n";
  CHECK(!check_allow_other(false, conf).ok());  // commented out
  std::ofstream(conf) << "mount_max = 1000\n  user_allow_other  \n";
  CHECK(check_allow_other(false, conf).ok());
  std::remove(conf.c_str());
  ::rmdir(tmpl);
}
