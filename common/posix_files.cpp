// SPDX-License-Identifier: MIT
#include "common/posix_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdlib>

namespace lazycache {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Status write_all(int fd, std::string_view bytes, const std::string& what) {
  const char* data = bytes.data();
  size_t size = bytes.size();
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status(what);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status();
}

Status make_dirs(const std::string& path) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return errno_status("mkdir " + cur);
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return errno_status("stat " + path);
  if (!S_ISDIR(st.st_mode)) return Status(ErrorCode::kIo, path + " is not a directory", ENOTDIR);
  return Status();
}

Result<std::string> real_path(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return errno_status("realpath " + path);
  return std::string(buf);
}

Result<std::string> read_whole_file(const std::string& path, size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_status("open " + path);
  std::string out;
  struct stat st;
  if (::fstat(fd.get(), &st) == 0 && st.st_size > 0 && static_cast<size_t>(st.st_size) <= max_bytes) {
    out.reserve(static_cast<size_t>(st.st_size));
  }
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) return Status(ErrorCode::kCorrupt, path + " is larger than expected");
  }
  return out;
}

Result<ByteBuffer> read_whole_file_bytes(const std::string& path, size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_status("open " + path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return errno_status("fstat " + path);
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return Status(ErrorCode::kCorrupt, path + " is larger than expected");
  // Room for one byte more than stat says: a file that grew since is seen as larger, not cut.
  ByteBuffer out(static_cast<size_t>(st.st_size) + 1);
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("read " + path);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes) return Status(ErrorCode::kCorrupt, path + " is larger than expected");
  out.resize(got);
  return out;
}

Status write_new_file(const std::string& path, std::span<const std::byte> bytes, mode_t mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd.valid()) return errno_status("create " + path);
  Status s = write_all(fd.get(), std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), "write " + path);
  if (::close(fd.release()) != 0 && s.ok()) s = errno_status("close " + path);
  if (!s.ok()) ::unlink(path.c_str());
  return s;
}

std::string unique_temp_name(const std::string& path) {
  // One counter for the process: two threads replacing the same file must never share a
  // temporary, or one could rename the other's half-written file into place.
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter.fetch_add(1) + 1);
}

Status replace_file(const std::string& path, std::string_view content, mode_t mode) {
  const std::string tmp = unique_temp_name(path);
  LC_RETURN_IF_ERROR(write_new_file(tmp, std::as_bytes(std::span(content.data(), content.size())), mode));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = errno_status("rename " + tmp + " to " + path);
    ::unlink(tmp.c_str());
    return s;
  }
  return Status();
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(std::move(name));
  }
  ::closedir(d);
  return out;
}

bool remove_tree(const std::string& dir) {
  auto rm = [](const char* path, const struct stat*, int, FTW*) { return ::remove(path); };
  return ::nftw(dir.c_str(), rm, 64, FTW_DEPTH | FTW_PHYS) == 0 || errno == ENOENT;
}

}  // namespace lazycache
