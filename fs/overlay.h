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
// Names starting with ".wh." are therefore reserved: creating one through the overlay is EPERM
// (the names are in fs/overlay_layout.h).
//
// Identity: inode numbers are what the FUSE glue hands the kernel. Archive entries are numbered
// by fs/inode_numbers.h, as in a read-only mount (the mount root is 1, an archive entry N is
// N + 2; hardlinks: the group's canonical id), and keep that number when copied up; new files
// get numbers from InodeNumbers::first_free() on. Upper files are matched back to
// their number by (upper inode number), kept in a map only for upper entries, so a hardlink made
// in the upper layer shares its number.
// The node table (nodes_) holds a Node only for an inode whose place the archive cannot tell:
// files and directories made in the mount, archive entries renamed, unlinked while the kernel
// still knows them, opened (their handles), hardlinked, or looked up where the archive has them
// no more (a copy the kernel forgot and looks up again). Every other archive inode is
// "implicit": it sits at its archive (parent, name), its archive entry behind it, and only its
// kernel lookup count is kept, in a flat array by entry id (archive_lookups_, 4 bytes an entry
// whether or not it is looked up). A full read of the node fixture looks up 22,851 inodes; as
// Nodes with their name-map entries they took ~8 MiB of the daemon's idle RSS. The rule that
// keeps this exact: an implicit inode the kernel knows (count > 0) is always at its archive
// place, because every change of a name (rename, unlink, rmdir, a replaced rename target, a
// new link) and every open first turns the inode into a Node (materialize()); a Node back at its
// archive place with nothing else to keep becomes implicit again when its last handle closes.
// No descriptor is held for a Node either: only open files hold one.
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
// Thread-safety: every method may be called from any thread. Metadata changes are serialised by
// one mutex (mu_); reads and writes of open files run in parallel on their own descriptors. No
// copy-up holds mu_ while it reads the archive (up to the read timeout per frame): under mu_ the
// operation finds which files need archive bytes, marks their inodes as being fetched and drops
// mu_; the bytes go to temp files in work/; then, under mu_ again, the operation starts over
// (the tree may have changed meanwhile), finds the fetched copies, renames them into upper/ and
// switches the open handles to them. A rename of an archive directory first scans the whole
// subtree without changing anything, fetches every file it needs (a few at once), and only then
// builds the copy in upper/: a failed fetch leaves the directory as it was and work/ empty. While
// the store is slow, lookups, getattr and listings of the rest of the mount (and of the directory
// being renamed) go on; a second operation on an inode being fetched waits for that fetch. Disk:
// a rename holds the fetched copies of all its directory's files in work/ before it installs
// them, as much as the copy under upper/ takes (work/ and upper/ share one file system).
// Handles are shared: a release() while a read or write of the handle is in flight (which the
// kernel does not send) only drops the table's reference. Lock order: mu_ before a Handle's mu.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fs/filesystem.h"
#include "fs/inode_numbers.h"
#include "fs/page_cache_gate.h"

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
  static constexpr uint64_t kRootIno = InodeNumbers::kRootInode;

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
  Result<std::pair<OverlayEntry, uint64_t>> create(uint64_t parent, std::string_view name, uint32_t mode, int flags, const Caller& who);
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
  // A directory handle: list() taken at opendir, which readdir indexes by offset so that entries
  // made or removed meanwhile neither repeat nor shift the rest. The overlay owns the listings: a
  // session can end with the kernel's RELEASEDIR requests still queued, and the destructor frees
  // what was never released. listing() stays valid until release_dir() of the same handle, which
  // the kernel never sends while a READDIR of it runs; it is nullptr for an unknown handle.
  Result<uint64_t> open_dir(uint64_t ino);
  const std::vector<DirEntryInfo>* listing(uint64_t dir_handle) const;
  void release_dir(uint64_t dir_handle);

  Result<std::optional<std::string>> getxattr(uint64_t ino, std::string_view name);
  Result<std::vector<std::string>> listxattr(uint64_t ino);
  // flags: XATTR_CREATE / XATTR_REPLACE as setxattr(2).
  Status setxattr(uint64_t ino, std::string_view name, std::string_view value, int flags);
  Status removexattr(uint64_t ino, std::string_view name);

  // Free space and sizes of the upper file system, with the archive's entry count added.
  Result<struct statvfs> statfs();

  // Files copied up so far (counts whole copies, for tests and figures).
  uint64_t copy_ups() const;
  // Inodes that have a Node (see Identity above: the ones whose place the archive cannot tell,
  // the root included), for tests and figures.
  size_t nodes_kept() const;

  // The page-cache hand-off of a writable mount (fs/page_cache_gate.h). Archive file `file`
  // (canonical id), just decoded: when its inode still shows the archive's bytes, runs
  // `store(inode)` (the notify_store) and returns its result; else false without calling it.
  // Never takes the overlay's mutex (a fetch thread calls it). Inodes with an upper entry are
  // never offered, and open for writing, truncate and create cut their inode off first.
  bool offer_to_page_cache(EntryId file, const std::function<bool(uint64_t ino)>& store);
  bool page_cache_cut_off(uint64_t ino) const { return page_cache_gate_.is_cut_off(ino); }
  Filesystem& lower() const { return lower_; }

 private:
  struct Node {
    std::vector<std::pair<uint64_t, std::string>> links;  // (parent ino, name); empty once unlinked
    uint64_t nlookup = 0;
    std::optional<EntryId> lower;   // the archive entry behind it (dirs: merged with), if any
    std::vector<uint64_t> handles;  // open handles, so copy-up can switch them to the copy
  };
  // What node() finds for an inode: its Node, or for an implicit archive inode what the index
  // says (its own entry behind it, its archive parent's number).
  struct NodeView {
    Node* node = nullptr;  // nullptr: implicit (no handles, one link: its archive place)
    std::optional<EntryId> lower;
    uint64_t parent = 0;  // the parent of its first name; 0 when it has none (unlinked)
  };
  struct Handle;
  struct Resolved {
    bool exists = false;
    bool upper = false;                   // an upper entry exists at the path
    std::optional<EntryId> lower;         // archive entry visible at the path (merged dirs, lower-only)
    std::optional<EntryId> lower_behind;  // same-kind archive entry shadowed by the upper one
    struct stat st {};                    // lstat of the upper entry
  };

  // A file copy-up that needs archive bytes: what the operation asked for under mu_.
  struct FetchRequest {
    uint64_t ino = 0;
    EntryId lower_id = 0;
    uint64_t size = 0;  // bytes to copy (a truncate copies fewer)
  };
  // Its result: a complete copy in work/ (by name: no descriptor stays open), not yet installed.
  struct Fetched {
    FetchRequest request;
    std::string tmp;
  };
  // One operation's copy-ups (with_copy_up keeps it on its stack): what its last run of the body
  // asked for, and the copies fetched for it so far. Keyed by inode: the names of a hardlink
  // group are one file, fetched once.
  struct FetchSet {
    std::map<uint64_t, FetchRequest> needed;
    std::map<uint64_t, Fetched> fetched;
  };

  // Fetches one operation runs at once without mu_. The store's latency per frame dominates a
  // copy of many small files, so a few in flight hide most of it; each holds one descriptor and
  // one 4 MiB chunk, and the frame fetcher below has its own bound on store requests.
  static constexpr size_t kParallelFetches = 4;

  Overlay(Filesystem& lower, EntryId root, OverlayConfig config);

  // Runs `body` under mu_; when it stops because files must be fetched for their copy-up
  // (copy_up_entry or tree_bytes_ready recorded them in fetches_->needed and returned
  // kUnavailable), fetches them all without mu_ and runs `body` again, which then installs the
  // copies that still fit (same inode, archive entry and size) or finds the tree changed and
  // decides anew, maybe asking for more (the loop goes on until it asks for nothing). Copies
  // left unused when it ends, or on a failed fetch (whose error the operation returns), are
  // unlinked: work/ keeps nothing.
  template <typename F>
  auto with_copy_up(F&& body) -> decltype(body()) {
    std::unique_lock lock(mu_);
    FetchSet set;
    struct Cleanup {  // on every way out (declared after `lock`: runs while mu_ is held)
      Overlay& o;
      FetchSet& set;
      ~Cleanup() {
        o.fetches_ = nullptr;
        o.discard_fetched(set);
      }
    } cleanup{*this, set};
    while (true) {
      set.needed.clear();
      fetches_ = &set;
      auto r = body();
      fetches_ = nullptr;
      if (set.needed.empty()) return r;
      if (Status s = fetch_without_lock(lock, set); !s.ok()) return s;
    }
  }
  // Fetches set.needed into work/ with mu_ dropped, up to kParallelFetches at once; inodes
  // another operation is fetching are left to it and waited for (the rerun decides anew).
  // Returns with mu_ held and the copies in set.fetched; on a failure, the first store error.
  Status fetch_without_lock(std::unique_lock<std::mutex>& lock, FetchSet& set);
  // fetch_into_work for each request, a few at once, without mu_; after a failure the requests
  // not started yet are skipped (nullopt).
  std::vector<std::optional<Result<std::string>>> fetch_all_into_work(const std::vector<FetchRequest>& wants) const;
  static void discard_fetched(FetchSet& set);
  // The fetched copy for `want` (taken out of fetches_), if there is one that fits.
  std::optional<std::string> take_fetched(const FetchRequest& want);
  // True when the copy for `want` is here; else records it in fetches_->needed.
  bool fetched_or_needed(const FetchRequest& want);
  // A complete copy of archive entry `id` (its first `size` bytes, xattrs, owner, mode, mtime)
  // in a new temp file of work/. No overlay state: runs without mu_. Nothing is left behind
  // on failure.
  Result<std::string> fetch_into_work(EntryId id, uint64_t size) const;

  // All private helpers expect mu_ held.
  // kNotFound for an inode that is neither a Node nor an implicit inode the kernel knows.
  Result<NodeView> node(uint64_t ino);
  // Where the archive puts an inode: (parent ino, name), the name pointing into the index.
  struct Place {
    uint64_t parent = 0;  // 0: outside the mounted directory
    std::string_view name;
  };
  // The archive place of `ino` when it may be implicit (an archive entry's number, not the root,
  // not a hardlinked file: a group's names are tracked in its Node); else nullopt. One index
  // entry read: path_of() calls it per level.
  std::optional<Place> archive_place(uint64_t ino) const;
  // The Node of `ino`, made if it has none: an implicit inode the kernel knows brings its
  // archive place, count and entry along; one it does not know starts empty (no name, no count,
  // as a fresh number would), since its archive place may not hold it any more.
  Node& materialize(uint64_t ino);
  // The implicit inode the kernel knows at (parent, name): the archive entry of that name in
  // the parent's archive directory, when it has no Node and a count.
  std::optional<uint64_t> known_implicit_at(uint64_t parent, std::string_view name) const;
  // After a handle or kernel reference is dropped: erases a Node nobody uses, and makes a Node
  // back at its archive place with nothing else to keep implicit again.
  void settle(std::unordered_map<uint64_t, Node>::iterator it);
  Result<std::string> path_of(uint64_t ino);  // relative merged path, "" for the root
  std::string upper_path(const std::string& rel) const { return rel.empty() ? upper_ : upper_ + "/" + rel; }
  bool opaque(const std::string& rel) const;
  // True when directory `dir_ino` at `rel` has no upper directory (remembered: no_upper_dir_).
  bool no_upper_dir(uint64_t dir_ino, const std::string& rel);
  void upper_dirs_changed() { no_upper_dir_.clear(); }
  bool whiteout(const std::string& rel_dir, std::string_view name) const;
  Result<Resolved> resolve(uint64_t parent, std::string_view name);
  uint64_t ino_for(const Resolved& r);
  uint64_t lower_ino(EntryId id) const;
  Result<struct stat> stat_of(uint64_t ino);
  Result<struct stat> lower_stat(EntryId id, uint64_t ino) const;
  OverlayEntry remember(uint64_t ino, uint64_t parent, std::string_view name, std::optional<EntryId> lower, const struct stat& st);
  void drop_link(uint64_t parent, std::string_view name);
  Status ensure_upper_dir(uint64_t ino);
  Status ensure_upper_dir_path(const std::string& rel, EntryId lower_id, uint64_t ino);
  // A file that needs archive bytes stops the operation (kUnavailable, see with_copy_up) unless
  // its copy was fetched already; an empty file or a symlink is made here (no archive read).
  Status copy_up(uint64_t ino, std::optional<uint64_t> size_limit = std::nullopt);
  Status copy_up_entry(const std::string& rel, EntryId lower_id, uint64_t ino, std::optional<uint64_t> size_limit);
  // The archive entries of directory `rel` that its copy must bring up: those the merged view
  // still shows from the archive (not whited out, no upper entry of the name); directories
  // with an upper directory are listed too (their copy merges). Nothing when `rel` is opaque.
  struct ArchiveChild {
    std::string rel;
    EntryId id = 0;
    bool dir = false;
  };
  Result<std::vector<ArchiveChild>> archive_children_to_copy(const std::string& rel, EntryId lower_id);
  // The scan before a directory's copy: changes nothing, records every file below `rel` that
  // needs archive bytes and has no fetched copy; kUnavailable when there is one.
  Status tree_bytes_ready(const std::string& rel, EntryId lower_id);
  // Copies archive directory `rel` and everything below it into upper/ and marks it opaque.
  // Expects tree_bytes_ready() to have passed in the same hold of mu_ (the copies are here).
  Status copy_up_tree(const std::string& rel, EntryId lower_id, uint64_t ino);
  Status link_group_up(EntryId canonical_id, const std::string& copy);
  // The mount-relative archive paths of hardlink group `canonical_id` (a scan of the index).
  std::vector<std::string> group_paths(EntryId canonical_id) const;
  // True when archive path `rel` still shows its archive entry (no whiteout, opaque parent or
  // upper entry on the way).
  bool archive_path_visible(const std::string& rel) const;
  Status clear_whiteout(const std::string& rel_dir, std::string_view name);
  Status make_whiteout(const std::string& rel_dir, std::string_view name);
  Result<std::vector<DirEntryInfo>> list_at(const std::string& rel, bool has_upper, std::optional<EntryId> lower);
  Result<OverlayEntry> finish_create(uint64_t parent, std::string_view name, const Caller& who, bool replaced_whiteout);
  Status prepare_new_name(uint64_t parent, std::string_view name, bool* had_whiteout);
  Result<OverlayEntry> create_empty_file(uint64_t parent, std::string_view name, uint32_t mode, const Caller& who);
  void forget_upper_inode(const struct stat& st);
  Result<std::shared_ptr<Handle>> handle(uint64_t h);
  // The rename itself (rename() runs it through with_copy_up).
  Status rename_locked(uint64_t parent, std::string_view name, uint64_t new_parent, std::string_view new_name, unsigned flags);

  Filesystem& lower_;
  const EntryId root_;
  const InodeNumbers inodes_;  // archive entries' numbers (fs/inode_numbers.h)
  OverlayConfig config_;
  std::string upper_, work_;

  mutable std::mutex mu_;  // guards everything below; taken before any Handle::mu
  std::unordered_map<uint64_t, Node> nodes_;
  std::map<std::pair<uint64_t, std::string>, uint64_t> names_;  // (parent, name) -> inode, Nodes' names
  // Kernel lookup counts of implicit archive inodes, by entry id (an inode with a Node keeps its
  // count there, and has 0 here).
  std::vector<uint32_t> archive_lookups_;
  std::unordered_map<uint64_t, uint64_t> upper_ino_;  // upper st_ino -> our inode number
  std::unordered_map<uint64_t, std::shared_ptr<Handle>> handles_;
  FetchSet* fetches_ = nullptr;         // the running body's copy-ups (with_copy_up's own)
  std::set<uint64_t> fetching_;         // inodes whose copy is being fetched without mu_
  std::condition_variable fetch_done_;  // a fetch ended: its waiters decide anew
  uint64_t next_ino_ = 0;
  uint64_t next_handle_ = 1;
  mutable std::atomic<uint64_t> temp_counter_{0};  // work/ temp names; used without mu_
  uint64_t copy_ups_ = 0;
  mutable std::mutex listings_mu_;  // guards the two below only; never held with mu_
  std::unordered_map<uint64_t, std::unique_ptr<const std::vector<DirEntryInfo>>> listings_;
  uint64_t next_listing_ = 1;
  // Directories (inode numbers) known to have no upper directory, so a lookup in them or a
  // getattr of their archive files needs no lstat of upper/ ("is it in upper/?"; a node job
  // makes thousands). Cleared whenever a directory appears in upper/ (mkdir, copy-up of a
  // directory or of a file's parents, rename): rare next to lookups.
  std::unordered_set<uint64_t> no_upper_dir_;
  // Inodes the hand-off may no longer give archive bytes (offer_to_page_cache).
  PageCacheGate page_cache_gate_;
  // Set once upper/ may hold a whiteout: until then an archive hardlink group's link count is
  // the archive's, after it is counted (lower_stat).
  bool may_have_whiteouts_ = false;
};

}  // namespace lazycache::fs
