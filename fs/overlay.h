// SPDX-License-Identifier: MIT
// File: fs/overlay.h -- Overlay: a writable view of one directory of a read-only Filesystem,
// without FUSE. Every change goes to an upper directory on local disk; unchanged entries keep
// coming from the archive.
//
// Layout on disk (OverlayConfig::state_dir):
//   upper/   the changed part of the tree, at the same relative paths as in the mount;
//            ".wh.NAME" (an empty file) hides NAME of the archive (a whiteout);
//            ".wh..wh..opq" in a directory hides every archive entry below it (opaque);
//   work/    copy-up temp files, renamed into upper/ once complete (a crash never leaves a
//            half-copied file in upper/).
// Names starting with ".wh." are therefore reserved: creating one through the overlay is EPERM.
//
// Identity: inode numbers are what the FUSE adapter hands the kernel. The mount root is 1, an
// archive entry N is N + 2 (hardlinks: the group's canonical id), and it keeps that number when
// it is copied up; new files get numbers above every archive id. Upper files are matched back to
// their number by (upper inode number), kept in a map only for upper entries, so a hardlink made
// in the upper layer shares its number. The node table holds only what the kernel looks up
// (parent, name) pairs and lookup counts, never a descriptor: only open files hold one.
//
// Copy-up: the first write, truncate, chmod/chown/utimens, xattr change, link or rename of an
// archive file copies it to upper/ (for a truncate, only the bytes below the new size are
// fetched: the frames it needs). Directories are created in upper/ on demand (their entries
// still merge with the archive's); a renamed archive directory is copied up whole and marked
// opaque. Open read handles of a file being copied up switch to the copy, so every descriptor
// sees the same bytes, as on a normal disk.
//
// Copying up one name of an archive hardlink group links every other visible name of the group
// to the copy (found by a scan of the index: hardlinked files are rare and copied up once).
// Caveats: RENAME_EXCHANGE is not supported (EINVAL). Special files
// (devices, fifos, sockets) cannot be created (EPERM): an archive cannot hold them.
//
// Thread-safety: every method may be called from any thread. Metadata changes and copy-up are
// serialised by one mutex (mu_); reads and writes of open files run in parallel on their own
// descriptors. Lock order: mu_ before a Handle's mu.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fs/filesystem.h"

namespace lazycache::fs {

struct OverlayConfig {
  // Holds upper/ and work/; created if missing. Must be on a local file system (copy-up renames
  // from work/ into upper/).
  std::string state_dir;
};

// Who asks (the FUSE request's context): new entries are owned by them.
struct Caller {
  uint32_t uid = 0, gid = 0;
  uint32_t umask = 0;
};

// What a lookup/create returns: the inode number and its attributes (st_ino already mapped).
struct OverlayEntry {
  uint64_t ino = 0;
  struct stat st {};
};

struct DirEntryInfo {
  std::string name;
  uint64_t ino = 0;
  uint32_t type = 0;  // S_IFMT bits
};

// setattr's fields; only those set are applied.
struct SetAttr {
  std::optional<uint32_t> mode;
  std::optional<uint32_t> uid, gid;
  std::optional<uint64_t> size;
  std::optional<timespec> atime, mtime;  // tv_nsec may be UTIME_NOW
};

class Overlay {
 public:
  static constexpr uint64_t kRootIno = 1;

  // Serves directory `root` of `lower`. Errors: kIo (cannot create state_dir/upper or work),
  // kInvalidArgument (root is not a directory).
  static Result<std::unique_ptr<Overlay>> open(Filesystem& lower, EntryId root, OverlayConfig config);
  ~Overlay();
  Overlay(const Overlay&) = delete;
  Overlay& operator=(const Overlay&) = delete;

  const std::string& upper_dir() const { return upper_; }
  // True once anything was changed (upper/ is not empty).
  bool changed() const;

  // Errors are Status with the errno the kernel should see (kIo + errno, kNotFound = ENOENT).
  // lookup/create/mkdir/symlink/link/mknod count one kernel reference (forget() drops them).
  Result<OverlayEntry> lookup(uint64_t parent, std::string_view name);
  void forget(uint64_t ino, uint64_t nlookup);
  Result<struct stat> getattr(uint64_t ino);
  Result<struct stat> setattr(uint64_t ino, const SetAttr& attr, std::optional<uint64_t> handle);
  Result<std::string> readlink(uint64_t ino);
  Result<OverlayEntry> mkdir(uint64_t parent, std::string_view name, uint32_t mode, const Caller& who);
  // Regular files only (S_IFREG); anything else is EPERM.
  Result<OverlayEntry> mknod(uint64_t parent, std::string_view name, uint32_t mode, const Caller& who);
  Result<OverlayEntry> symlink(std::string_view target, uint64_t parent, std::string_view name, const Caller& who);
  Result<OverlayEntry> link(uint64_t ino, uint64_t new_parent, std::string_view new_name);
  Status unlink(uint64_t parent, std::string_view name);
  Status rmdir(uint64_t parent, std::string_view name);
  // flags: 0 or RENAME_NOREPLACE (RENAME_EXCHANGE is EINVAL).
  Status rename(uint64_t parent, std::string_view name, uint64_t new_parent, std::string_view new_name, unsigned flags);

  // Opens a file; write access or O_TRUNC copies it up first. Returns a handle for read/write/
  // fsync/release. `keep_cache` is set when the kernel may keep its cached pages.
  Result<uint64_t> open(uint64_t ino, int flags, bool* keep_cache = nullptr);
  // Creates and opens NAME (O_EXCL semantics follow `flags`).
  Result<std::pair<OverlayEntry, uint64_t>> create(uint64_t parent, std::string_view name, uint32_t mode, int flags,
                                                   const Caller& who);
  // Reads of an archive file go through Filesystem::read (asynchronous: `cb` may run on a fetch
  // thread); reads of upper files call `cb` inline with one piece.
  void read(uint64_t handle, uint64_t offset, size_t size, ReadCallback cb);
  Result<std::string> read_sync(uint64_t handle, uint64_t offset, size_t size);
  Result<size_t> write(uint64_t handle, std::span<const char> data, uint64_t offset);
  Status fsync(uint64_t handle, bool datasync);
  void release(uint64_t handle);

  // A snapshot of the merged directory (without "." and ".."): later changes do not disturb a
  // listing in progress, as getdents on a normal disk tolerates them.
  Result<std::vector<DirEntryInfo>> list(uint64_t ino);

  Result<std::optional<std::string>> getxattr(uint64_t ino, std::string_view name);
  Result<std::vector<std::string>> listxattr(uint64_t ino);
  // flags: XATTR_CREATE / XATTR_REPLACE as setxattr(2).
  Status setxattr(uint64_t ino, std::string_view name, std::string_view value, int flags);
  Status removexattr(uint64_t ino, std::string_view name);

  // Free space and sizes of the upper file system, with the archive's entry count added.
  Result<struct statvfs> statfs();

  // Files copied up so far (counts whole copies, for tests and figures).
  uint64_t copy_ups() const;

 private:
  struct Node {
    std::vector<std::pair<uint64_t, std::string>> links;  // (parent ino, name); empty once unlinked
    uint64_t nlookup = 0;
    std::optional<EntryId> lower;  // the archive entry behind it (dirs: merged with), if any
    std::vector<uint64_t> handles;  // open handles, so copy-up can switch them to the copy
  };
  struct Handle;
  struct Resolved {
    bool exists = false;
    bool upper = false;            // an upper entry exists at the path
    std::optional<EntryId> lower;  // archive entry visible at the path (merged dirs, lower-only)
    std::optional<EntryId> lower_behind;  // same-kind archive entry shadowed by the upper one
    struct stat st {};             // lstat of the upper entry
  };

  Overlay(Filesystem& lower, EntryId root, OverlayConfig config);

  // All private helpers expect mu_ held.
  Result<Node*> node(uint64_t ino);
  Result<std::string> path_of(uint64_t ino);  // relative merged path, "" for the root
  std::string upper_path(const std::string& rel) const { return rel.empty() ? upper_ : upper_ + "/" + rel; }
  bool opaque(const std::string& rel) const;
  bool whiteout(const std::string& rel_dir, std::string_view name) const;
  Result<Resolved> resolve(uint64_t parent, std::string_view name);
  uint64_t ino_for(const Resolved& r);
  uint64_t lower_ino(EntryId id) const;
  Result<struct stat> stat_of(uint64_t ino);
  Result<struct stat> lower_stat(EntryId id, uint64_t ino) const;
  OverlayEntry remember(uint64_t ino, uint64_t parent, std::string_view name, std::optional<EntryId> lower,
                        const struct stat& st);
  void drop_link(uint64_t parent, std::string_view name);
  Status ensure_upper_dir(uint64_t ino);
  Status ensure_upper_dir_path(const std::string& rel, EntryId lower_id, uint64_t ino);
  Status copy_up(uint64_t ino, std::optional<uint64_t> size_limit = std::nullopt);
  Status copy_up_entry(const std::string& rel, EntryId lower_id, uint64_t ino, std::optional<uint64_t> size_limit);
  Status copy_up_tree(const std::string& rel, EntryId lower_id, uint64_t ino);
  Status link_group_up(EntryId canonical_id, const std::string& copy);
  Status clear_whiteout(const std::string& rel_dir, std::string_view name);
  Status make_whiteout(const std::string& rel_dir, std::string_view name);
  Result<std::vector<DirEntryInfo>> list_at(const std::string& rel, bool has_upper, std::optional<EntryId> lower);
  Result<OverlayEntry> finish_create(uint64_t parent, std::string_view name, const Caller& who, bool replaced_whiteout);
  Status prepare_new_name(uint64_t parent, std::string_view name, bool* had_whiteout);
  Result<OverlayEntry> create_empty_file(uint64_t parent, std::string_view name, uint32_t mode, const Caller& who);
  void forget_upper_inode(const struct stat& st);
  Result<Handle*> handle(uint64_t h);

  Filesystem& lower_;
  const EntryId root_;
  OverlayConfig config_;
  std::string upper_, work_;

  mutable std::mutex mu_;  // guards everything below; taken before any Handle::mu
  std::unordered_map<uint64_t, Node> nodes_;
  std::map<std::pair<uint64_t, std::string>, uint64_t> names_;  // (parent, name) -> inode, known names
  std::unordered_map<uint64_t, uint64_t> upper_ino_;  // upper st_ino -> our inode number
  std::unordered_map<uint64_t, std::unique_ptr<Handle>> handles_;
  uint64_t next_ino_ = 0;
  uint64_t next_handle_ = 1;
  uint64_t temp_counter_ = 0;
  uint64_t copy_ups_ = 0;
};

}  // namespace lazycache::fs
