// SPDX-License-Identifier: MIT
// File: tests/fs/fs_test_util.h -- helpers for fs/ tests: chunk contents, ByteSources that fail
// or hang on demand, and a generated node_modules-like tree.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/byte_sink.h"
#include "common/byte_source.h"
#include "format/archive.h"
#include "format/archive_writer.h"
#include "format/hashing.h"

namespace lazycache::testing {

// A directory under /tmp removed with everything in it when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string name = "/tmp/lc-fs-test.XXXXXX";
    if (::mkdtemp(name.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = name;
  }
  ~TempDir() {
    const std::string cmd = "rm -rf '" + path_ + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "cannot remove %s\n", path_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& content, mode_t mode = 0644) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw std::runtime_error("cannot create " + path);
  const bool ok = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) && ::fchmod(fd, mode) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("cannot write " + path);
}

inline std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  std::string out;
  char buf[1 << 16];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

inline void set_mtime(const std::string& path, int64_t seconds, long nanoseconds) {
  const timespec times[2] = {{0, UTIME_OMIT}, {seconds, nanoseconds}};
  if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) throw std::runtime_error("cannot set mtime of " + path);
}

// n bytes that depend on `seed`: runs of text (compressible) between runs of noise.
inline std::string pattern(size_t n, uint64_t seed) {
  std::string out(n, ' ');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = (i & 128) ? static_cast<char>('A' + (x % 23)) : static_cast<char>(x >> 24);
  }
  return out;
}

// Packs `rel` (relative to `cwd`, so the archive root is named `rel`) into `archive`, with
// `hot_paths` (archive paths) laid out first and recorded as the index hot list.
inline void pack_tree(const std::string& cwd, const std::vector<std::string>& rels, const std::string& archive,
                      uint64_t frame_size = 64 << 10, const std::vector<std::string>& hot_paths = {}) {
  char old[4096];
  if (::getcwd(old, sizeof old) == nullptr || ::chdir(cwd.c_str()) != 0) throw std::runtime_error("chdir " + cwd);
  std::vector<format::PackRoot> roots;
  for (const auto& r : rels) roots.push_back(format::PackRoot{r});
  auto sink = LocalFileSink::create(archive);
  format::PackConfig config;
  config.frame_size_bytes = frame_size;
  config.hot_paths = hot_paths;
  config.warn = [](const std::string&) {};
  auto stats = sink.ok() ? format::write_archive(roots, **sink, config) : Result<format::PackStats>(sink.error());
  if (::chdir(old) != 0 || !stats.ok()) throw std::runtime_error("pack failed: " + stats.status().to_string());
}

// The archive at `path`, opened for reading (throws on failure: test setup).
inline std::unique_ptr<format::ArchiveReader> open_archive_file(const std::string& path) {
  auto source = LocalFileSource::open(path);
  if (!source.ok()) throw std::runtime_error("cannot open " + path + ": " + source.error().to_string());
  auto reader = format::ArchiveReader::open(std::shared_ptr<const ByteSource>(std::move(source).value()));
  if (!reader.ok()) throw std::runtime_error("cannot read " + path + ": " + reader.error().to_string());
  return std::move(reader).value();
}

inline format::Digest128 digest_of(const std::string& s) { return format::xxh3_128(std::as_bytes(std::span(s.data(), s.size()))); }

// Wraps a source; reads can be made to fail (kUnavailable), to flip a byte, or to hang until
// released (then fail, or read on). Counts reads.
class ControlledSource final : public ByteSource {
 public:
  explicit ControlledSource(std::shared_ptr<const ByteSource> inner) : inner_(std::move(inner)) {}
  ~ControlledSource() override { release(); }
  uint64_t size() const override { return inner_->size(); }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override {
    reads.fetch_add(1);
    if (fail.load()) return Status(ErrorCode::kUnavailable, "injected: store unreachable");
    if (hang.load()) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return released_; });
      if (!read_after_release.load()) return Status(ErrorCode::kUnavailable, "injected: hung read released");
    }
    auto n = inner_->read_at(offset, out);
    const bool flip_this = flip.load() || flip_next.fetch_sub(1) > 0;
    if (n.ok() && flip_this && *n > 100) out[100] ^= std::byte{0x40};
    return n;
  }
  std::string describe() const override { return "controlled " + inner_->describe(); }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

  mutable std::atomic<uint64_t> reads{0};
  std::atomic<bool> fail{false}, flip{false}, hang{false};
  mutable std::atomic<int> flip_next{0};  // damage this many replies, then none
  // Hung reads, once released, go on to the store (else they fail).
  std::atomic<bool> read_after_release{false};

 private:
  std::shared_ptr<const ByteSource> inner_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool released_ = false;
};

// A tree shaped like node_modules: many packages, each with package.json, a few small .js files,
// a nested dir, some larger files, .bin symlinks, a hardlink, an empty dir and an empty file.
// `packages` x ~8 entries. Contents depend on the path, so any read can be checked.
inline void make_node_like_tree(const std::string& root, int packages, uint64_t seed = 1) {
  ::mkdir(root.c_str(), 0755);
  const std::string nm = root + "/node_modules";
  ::mkdir(nm.c_str(), 0755);
  ::mkdir((nm + "/.bin").c_str(), 0755);
  for (int p = 0; p < packages; ++p) {
    const std::string pkg = nm + "/pkg-" + std::to_string(p);
    ::mkdir(pkg.c_str(), 0755);
    ::mkdir((pkg + "/lib").c_str(), 0755);
    write_file(pkg + "/package.json", "{\"name\":\"pkg-" + std::to_string(p) + "\",\"version\":\"1.0." + std::to_string(p) + "\"}\n");
    write_file(pkg + "/index.js", pattern(200 + (p * 37) % 3000, seed * 1000 + static_cast<uint64_t>(p)));
    write_file(pkg + "/lib/util.js", pattern(500 + (p * 91) % 9000, seed * 7000 + static_cast<uint64_t>(p)), 0755);
    if (p % 10 == 0) write_file(pkg + "/lib/big.bin", pattern(300000 + static_cast<size_t>(p) * 1000, seed + static_cast<uint64_t>(p)));
    if (p % 7 == 0) write_file(pkg + "/EMPTY", "");
    if (p % 13 == 0) ::mkdir((pkg + "/empty-dir").c_str(), 0700);
    if (p % 5 == 0) {
      const std::string target = "../pkg-" + std::to_string(p) + "/index.js";
      if (::symlink(target.c_str(), (nm + "/.bin/cmd-" + std::to_string(p)).c_str()) != 0) throw std::runtime_error("symlink");
    }
    if (p % 17 == 0) ::link((pkg + "/package.json").c_str(), (pkg + "/package.hardlink.json").c_str());
    set_mtime(pkg + "/index.js", 1600000000 + p, 123456789);
  }
}

}  // namespace lazycache::testing
