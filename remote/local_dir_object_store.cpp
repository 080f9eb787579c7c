// SPDX-License-Identifier: MIT
#include "remote/local_dir_object_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <optional>
#include <vector>

#include "common/posix_files.h"

namespace lazycache::remote {
namespace {

constexpr const char* kTmpDir = ".lazycache-tmp";
// A live writer writes (and so touches) its temporary at least every few seconds.
constexpr time_t kStaleTemporaryAge = 3600;

bool reserved_key(std::string_view key) {
  const std::string_view tmp = kTmpDir;
  return key.size() >= tmp.size() && key.substr(0, tmp.size()) == tmp && (key.size() == tmp.size() || key[tmp.size()] == '/');
}

Status check_local_key(std::string_view key) {
  LC_RETURN_IF_ERROR(check_object_key(key));
  if (reserved_key(key))
    return Status(ErrorCode::kInvalidArgument,
                  "invalid object key '" + std::string(key) + "': " + kTmpDir + "/ holds the store's temporaries");
  return Status();
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

// "<pid>.<n>.<host>" -> (pid, host); nullopt for any other name.
std::optional<std::pair<pid_t, std::string>> parse_temporary_name(const std::string& name) {
  const size_t dot1 = name.find('.');
  const size_t dot2 = dot1 == std::string::npos ? dot1 : name.find('.', dot1 + 1);
  if (dot1 == 0 || dot2 == std::string::npos || dot2 == dot1 + 1 || dot2 + 1 >= name.size()) return std::nullopt;
  if (name.find_first_not_of("0123456789") != dot1 ||
      name.substr(dot1 + 1, dot2 - dot1 - 1).find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  if (dot1 > 9) return std::nullopt;
  return std::make_pair(static_cast<pid_t>(std::stol(name.substr(0, dot1))), name.substr(dot2 + 1));
}

std::string etag_of(const struct stat& st) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "\"%llx-%llx-%llx.%lx\"", static_cast<unsigned long long>(st.st_ino),
                static_cast<unsigned long long>(st.st_size), static_cast<unsigned long long>(st.st_mtim.tv_sec),
                static_cast<unsigned long>(st.st_mtim.tv_nsec));
  return buf;
}

ObjectInfo info_of(std::string_view key, const struct stat& st) {
  return ObjectInfo{std::string(key), static_cast<uint64_t>(st.st_size), etag_of(st), st.st_mtim.tv_sec, st.st_atim.tv_sec};
}

Status mkdirs(const std::string& path) {
  if (path.empty()) return Status();
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status();
    return Status(ErrorCode::kIo, path + " exists and is not a directory");
  }
  auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) LC_RETURN_IF_ERROR(mkdirs(path.substr(0, slash)));
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return errno_status("mkdir " + path);
  return Status();
}

// Closes the fd on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Unlinks the path on scope exit (a temporary that was published by link(2), or never).
struct Unlink {
  std::string path;
  ~Unlink() { ::unlink(path.c_str()); }
};

// Appends `bytes` to the temporary `path` (common/posix_files.h's write_all, on bytes).
Status write_bytes(int fd, std::span<const std::byte> bytes, const std::string& path) {
  return write_all(fd, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), "writing " + path);
}

// Walks DIR/rel recursively, collecting keys (relative to DIR) with `prefix` after `after`.
Status walk(const std::string& root, const std::string& rel, std::string_view prefix, std::string_view after,
            std::vector<std::pair<std::string, struct stat>>& out) {
  std::string path = rel.empty() ? root : root + "/" + rel;
  DIR* d = ::opendir(path.c_str());
  if (!d) {
    if (errno == ENOENT || errno == ENOTDIR) return Status();
    return errno_status("listing " + path);
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (rel.empty() && n == kTmpDir) continue;
    names.push_back(std::move(n));
  }
  ::closedir(d);
  for (const auto& n : names) {
    std::string key = rel.empty() ? n : rel + "/" + n;
    struct stat st {};
    if (::lstat((root + "/" + key).c_str(), &st) != 0) continue;  // removed meanwhile
    if (S_ISDIR(st.st_mode)) {
      // Descend only where keys under it can still match the prefix.
      std::string dir_prefix = key + "/";
      size_t common = std::min(dir_prefix.size(), prefix.size());
      if (dir_prefix.compare(0, common, prefix.substr(0, common)) != 0) continue;
      LC_RETURN_IF_ERROR(walk(root, key, prefix, after, out));
    } else if (S_ISREG(st.st_mode)) {
      if (key.compare(0, prefix.size(), prefix) != 0) continue;
      if (!after.empty() && key <= after) continue;
      out.emplace_back(key, st);
    }
  }
  return Status();
}

}  // namespace

Result<std::shared_ptr<LocalDirObjectStore>> LocalDirObjectStore::open(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  LC_RETURN_IF_ERROR(mkdirs(d).with_context("opening store directory"));
  LC_RETURN_IF_ERROR(mkdirs(d + "/" + kTmpDir).with_context("opening store directory"));
  return std::shared_ptr<LocalDirObjectStore>(new LocalDirObjectStore(d));
}

Result<ObjectInfo> LocalDirObjectStore::head(std::string_view key) {
  LC_RETURN_IF_ERROR(check_object_key(key));
  if (reserved_key(key)) return Status(ErrorCode::kNotFound, "no object " + std::string(key) + " in " + describe());
  struct stat st {};
  std::string path = path_of(key);
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Status(ErrorCode::kNotFound, "no object " + std::string(key) + " in " + describe());
    return errno_status("stat " + path);
  }
  if (!S_ISREG(st.st_mode)) return Status(ErrorCode::kNotFound, "no object " + std::string(key) + " in " + describe());
  return info_of(key, st);
}

Result<size_t> LocalDirObjectStore::get_range(const RangeRequest& req, std::span<std::byte> out) {
  LC_RETURN_IF_ERROR(check_object_key(req.key));
  if (reserved_key(req.key)) return Status(ErrorCode::kNotFound, "no object " + req.key + " in " + describe());
  if (req.length == 0 || out.size() < req.length) return Status(ErrorCode::kInvalidArgument, "get_range of " + req.key + ": bad length");
  std::string path = path_of(req.key);
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Status(ErrorCode::kNotFound, "no object " + req.key + " in " + describe());
    return errno_status("opening " + path);
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return errno_status("stat " + path);
  // Checked on the open descriptor: a rename over the key after this point does not change
  // what this descriptor reads, so the bytes always belong to the ETag we compared.
  if (!req.if_match.empty() && etag_of(st) != req.if_match)
    return Status(ErrorCode::kPreconditionFailed, "object " + req.key + " in " + describe() + " was replaced (ETag changed)");
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (req.offset >= size) return size_t{0};
  size_t want = static_cast<size_t>(std::min<uint64_t>(req.length, size - req.offset));
  size_t done = 0;
  while (done < want) {
    ssize_t n = ::pread(f.fd, out.data() + done, want - done, static_cast<off_t>(req.offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("reading " + path);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

std::string LocalDirObjectStore::new_temporary_path() {
  remove_stale_temporaries();
  static std::atomic<uint64_t> counter{0};
  static const std::string host = host_name();
  return dir_ + "/" + kTmpDir + "/" + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1)) + "." + host;
}

Result<int> LocalDirObjectStore::create_temporary(std::string_view key, bool create_only, std::string* tmp) {
  LC_RETURN_IF_ERROR(check_local_key(key));
  *tmp = new_temporary_path();
  if (create_only) {
    struct stat st {};
    if (::stat(path_of(key).c_str(), &st) == 0)
      return Status(ErrorCode::kAlreadyExists, "object " + std::string(key) + " already exists in " + describe());
  }
  const int fd = ::open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status("creating " + *tmp);
  return fd;
}

Result<ObjectInfo> LocalDirObjectStore::publish(int fd, const std::string& tmp, std::string_view key, bool create_only) {
  if (::fsync(fd) != 0) return errno_status("fsync " + tmp);
  const std::string final_path = path_of(key);
  auto slash = final_path.rfind('/');
  LC_RETURN_IF_ERROR(mkdirs(final_path.substr(0, slash)));
  if (create_only) {
    // link(2) fails with EEXIST if the name exists, so two racing savers publish exactly once.
    // The caller unlinks the temporary either way.
    if (::link(tmp.c_str(), final_path.c_str()) != 0) {
      if (errno == EEXIST) return Status(ErrorCode::kAlreadyExists, "object " + std::string(key) + " already exists in " + describe());
      return errno_status("publishing " + final_path);
    }
  } else if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    return errno_status("publishing " + final_path);
  }
  struct stat st {};
  if (::stat(final_path.c_str(), &st) != 0) return errno_status("stat " + final_path);
  return info_of(key, st);
}

Result<ObjectInfo> LocalDirObjectStore::put(std::string_view key, const BodyReader& body, const PutOptions& opts) {
  std::string tmp;
  LC_ASSIGN_OR_RETURN(int fd, create_temporary(key, opts.create_only, &tmp));
  Fd f{fd};
  Unlink cleanup{tmp};
  std::vector<std::byte> buf(1 << 20);
  for (;;) {
    LC_ASSIGN_OR_RETURN(size_t n, body(buf));
    if (n == 0) break;
    if (n > buf.size()) return Status(ErrorCode::kInternal, "body reader returned more than asked");
    LC_RETURN_IF_ERROR(write_bytes(f.fd, std::span<const std::byte>(buf.data(), n), tmp));
  }
  return publish(f.fd, tmp, key, opts.create_only);
}

// A multipart upload into a temporary: parts are appended in order; a copied part is
// copy_file_range(2) from the source object's file (a reflink or an in-kernel copy where the
// file system can, never through this process's memory otherwise than as a fallback).
class LocalDirUpload final : public MultipartUpload {
 public:
  LocalDirUpload(LocalDirObjectStore& store, std::string key, bool create_only, std::string tmp, int fd)
      : store_(store), key_(std::move(key)), create_only_(create_only), tmp_(std::move(tmp)), fd_(fd) {}
  // The temporary goes whatever happened (a published one was linked or renamed away).
  ~LocalDirUpload() override {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
  LocalDirUpload(const LocalDirUpload&) = delete;
  LocalDirUpload& operator=(const LocalDirUpload&) = delete;
  uint64_t min_part_bytes() const override { return 1; }
  uint64_t max_part_bytes() const override { return UINT64_MAX; }

  Status upload_part(int number, std::span<const std::byte> bytes) override {
    LC_RETURN_IF_ERROR(next_part(number));
    return write_bytes(fd_, bytes, tmp_);
  }

  Status copy_part(int number, const RangeRequest& source) override {
    LC_RETURN_IF_ERROR(next_part(number));
    LC_RETURN_IF_ERROR(check_local_key(source.key));
    const std::string path = store_.path_of(source.key);
    Fd in{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (in.fd < 0) {
      if (errno == ENOENT || errno == ENOTDIR) return Status(ErrorCode::kNotFound, "no object " + source.key + " in " + store_.describe());
      return errno_status("opening " + path);
    }
    struct stat st {};
    if (::fstat(in.fd, &st) != 0) return errno_status("stat " + path);
    // Checked on the open descriptor, as get_range does: the bytes copied are the pinned object's.
    if (!source.if_match.empty() && etag_of(st) != source.if_match)
      return Status(ErrorCode::kPreconditionFailed, "object " + source.key + " in " + store_.describe() + " was replaced (ETag changed)");
    if (source.offset + source.length > static_cast<uint64_t>(st.st_size))
      return Status(ErrorCode::kInvalidArgument, "copying bytes " + std::to_string(source.offset) + "+" + std::to_string(source.length) +
                                                     " of " + source.key + ": the object has " + std::to_string(st.st_size));
    off_t in_off = static_cast<off_t>(source.offset);
    uint64_t left = source.length;
    while (left > 0) {
      ssize_t n = ::copy_file_range(in.fd, &in_off, fd_, nullptr, left, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP))
        return copy_by_reading(in.fd, in_off, left, path);
      if (n < 0) return errno_status("copying " + path + " into " + tmp_);
      if (n == 0) return Status(ErrorCode::kIo, "copying " + path + ": the file ended early");
      left -= static_cast<uint64_t>(n);
    }
    return Status();
  }

  Result<ObjectInfo> complete() override { return store_.publish(fd_, tmp_, key_, create_only_); }

 private:
  Status next_part(int number) {
    if (number != next_)
      return Status(ErrorCode::kInvalidArgument, "part " + std::to_string(number) + " of " + key_ + " sent out of order");
    ++next_;
    return Status();
  }
  Status copy_by_reading(int in, off_t offset, uint64_t left, const std::string& path) {
    std::vector<std::byte> buf(1 << 20);
    while (left > 0) {
      ssize_t n = ::pread(in, buf.data(), std::min<uint64_t>(left, buf.size()), offset);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno_status("reading " + path);
      if (n == 0) return Status(ErrorCode::kIo, "copying " + path + ": the file ended early");
      LC_RETURN_IF_ERROR(write_bytes(fd_, std::span<const std::byte>(buf.data(), static_cast<size_t>(n)), tmp_));
      offset += n;
      left -= static_cast<uint64_t>(n);
    }
    return Status();
  }

  LocalDirObjectStore& store_;
  std::string key_;
  bool create_only_;
  std::string tmp_;
  int fd_;
  int next_ = 1;
};

Result<std::unique_ptr<MultipartUpload>> LocalDirObjectStore::start_upload(std::string_view key, const PutOptions& opts) {
  std::string tmp;
  LC_ASSIGN_OR_RETURN(int fd, create_temporary(key, opts.create_only, &tmp));
  return std::unique_ptr<MultipartUpload>(new LocalDirUpload(*this, std::string(key), opts.create_only, tmp, fd));
}

Result<ListPage> LocalDirObjectStore::list(std::string_view prefix, std::string_view continuation) {
  std::vector<std::pair<std::string, struct stat>> found;
  // Start at the deepest directory the prefix names, not at the root.
  std::string start;
  if (auto slash = prefix.rfind('/'); slash != std::string_view::npos) start = std::string(prefix.substr(0, slash));
  if (!start.empty()) LC_RETURN_IF_ERROR(check_object_key(start));
  if (reserved_key(start)) return ListPage{};  // temporaries are never objects
  LC_RETURN_IF_ERROR(walk(dir_, start, prefix, continuation, found));
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  ListPage page;
  for (const auto& [key, st] : found) {
    if (page.objects.size() == page_size_) {
      page.next_continuation = page.objects.back().key;
      break;
    }
    page.objects.push_back(info_of(key, st));
  }
  return page;
}

size_t LocalDirObjectStore::remove_stale_temporaries() {
  const std::string tmp_dir = dir_ + "/" + kTmpDir;
  DIR* d = ::opendir(tmp_dir.c_str());
  if (!d) return 0;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (std::string_view(e->d_name) != "." && std::string_view(e->d_name) != "..") names.emplace_back(e->d_name);
  }
  ::closedir(d);
  static const std::string host = host_name();
  const time_t now = std::time(nullptr);
  size_t removed = 0;
  for (const auto& name : names) {
    const std::string path = tmp_dir + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
    bool stale = now - st.st_mtim.tv_sec > kStaleTemporaryAge;
    // Only a pid of this host can be asked; a store directory may be shared over the network.
    if (auto writer = parse_temporary_name(name); !stale && writer && writer->second == host) {
      stale = writer->first > 0 && ::kill(writer->first, 0) != 0 && errno == ESRCH;
    }
    if (stale && ::unlink(path.c_str()) == 0) ++removed;
  }
  return removed;
}

Status LocalDirObjectStore::remove(std::string_view key) {
  LC_RETURN_IF_ERROR(check_local_key(key));
  std::string path = path_of(key);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT && errno != ENOTDIR) return errno_status("removing " + path);
  return Status();
}

Status LocalDirObjectStore::record_access(std::string_view key) {
  LC_RETURN_IF_ERROR(check_local_key(key));
  std::string path = path_of(key);
  const struct timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
  if (::utimensat(AT_FDCWD, path.c_str(), times, 0) != 0) return errno_status("recording the use of " + path);
  return Status();
}

}  // namespace lazycache::remote
