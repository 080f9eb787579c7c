// SPDX-License-Identifier: MIT
// extract_archive(): index-driven extraction with a fetch -> decode -> write pipeline.
#include "format/extractor.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "format/dir_stack.h"
#include "format/dirs_ahead.h"
#include "format/file_writer_pool.h"
#include "format/frame_pipeline.h"
#include "format/fs_util.h"
#include "format/quote.h"
#include "format/sparse_write.h"

namespace lazycache::format {

namespace {

// A batch handed to a file writer: up to this many files or bytes (see write_files). 32 small
// files are about 1/14 of a 4 MiB frame of the node tree, so 8 writers still share every frame.
constexpr size_t kBatchFiles = 32;
constexpr uint64_t kBatchBytes = 1 << 20;
// Decoded frames the file writers may hold at once (queued or being written), besides the
// pipeline's decode window. 3 frames are 12+ batches, enough for every writer. Why no more: the
// writers are the slower side, so a looser bound (it was a quarter of the memory budget, 16 frames
// of 4 MiB) only lets the decoders run ahead into fresh buffers: 20-odd frames of node's 49 were
// decoded into newly allocated memory, zero-filled and page-faulted in (6 % of the restore's CPU
// by perf), where recycled buffers cost nothing.
constexpr uint64_t kWriterFrames = 3;

// atime left alone (UTIME_OMIT), mtime from the entry, floor-divided for pre-1970 times.
void fill_mtime(const Entry& e, struct timespec ts[2]) {
  ts[0].tv_sec = 0;
  ts[0].tv_nsec = UTIME_OMIT;
  ts[1].tv_sec = e.mtime_ns >= 0 ? e.mtime_ns / 1000000000 : -((-(e.mtime_ns + 1)) / 1000000000) - 1;
  ts[1].tv_nsec = e.mtime_ns - ts[1].tv_sec * 1000000000;
}

// "/a/b/c/" -> {"/a/b", "c"}; "c" -> {".", "c"}; "/c" -> {"/", "c"}.
std::pair<std::string, std::string> split_destination(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

struct Item {
  EntryId id = 0;
  uint32_t target = 0;
  bool create_only = false;  // an ancestor of an only_paths selection: create, keep metadata
  // The entry, decoded once by select_items() (the write path reads it a dozen times per file);
  // its views point into the index, which outlives the extract. Empty in the ad-hoc items that
  // only name a directory for rollback().
  Entry e;
};

// Removes `name` in `dirfd` and, for a directory, everything below it, never following a
// symlink. Best effort: returns false when something stayed.
bool remove_tree(int dirfd, const std::string& name) {
  if (::unlinkat(dirfd, name.c_str(), 0) == 0) return true;
  if (errno != EISDIR && errno != EPERM) return errno == ENOENT;
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  ::fchmod(fd, 0700);  // finish_dirs may have made it read-only
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return false;
  }
  std::vector<std::string> kids;
  while (struct dirent* de = ::readdir(d))
    if (std::strcmp(de->d_name, ".") != 0 && std::strcmp(de->d_name, "..") != 0) kids.emplace_back(de->d_name);
  bool ok = true;
  for (const auto& k : kids) ok = remove_tree(::dirfd(d), k) && ok;
  ::closedir(d);
  return ::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) == 0 && ok;
}

// Sets or clears the Orlov "top of a directory hierarchy" flag (chattr +T) on directory `fd`;
// false where the file system has no such flag (anything but ext2/3/4) or refuses it.
// Why: ext4 places a new directory in its parent's block group, and without a journal skips every
// inode freed in the last minute when it allocates one, reading each one's inode-table entry:
// after an `rm -rf` of the previous tree (how a CI job clears a cache path), every file of the
// new tree paid a scan over the tens of thousands just freed in those same groups (45 % of all
// samples in find_inode_bit -> recently_deleted). Flagged, the staged target's subdirectories
// are spread over groups with free inodes, as ext4 does for top-level directories:
// `tar -x` of node into a +T directory 0.9-1.5 s against 2.6-3.1 s (load 7).
bool set_topdir_flag(int fd, bool on) {
  int flags = 0;
  if (::ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) return false;
  const int want = on ? (flags | FS_TOPDIR_FL) : (flags & ~FS_TOPDIR_FL);
  return want == flags || ::ioctl(fd, FS_IOC_SETFLAGS, &want) == 0;
}

// The process umask, read without changing it (umask(2) would race with other threads); 0777
// when unknown, so that every mode is set explicitly.
mode_t current_umask() {
  FILE* f = std::fopen("/proc/self/status", "re");
  if (!f) return 0777;
  unsigned mask = 0777;
  char line[256];
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "Umask: %o", &mask) == 1) break;
  std::fclose(f);
  return static_cast<mode_t>(mask);
}

class Extractor {
 public:
  Extractor(const ArchiveReader& reader, const ExtractConfig& config) : r_(reader), idx_(reader.index()), cfg_(config) {}

  Result<ExtractStats> run();

 private:
  struct Target {
    Fd base;  // directory for a directory target; the parent dir otherwise
    bool is_dir = true;
    bool created = false;  // a directory target this run made (removed whole on failure)
    std::string leaf;      // non-directory targets: the final name in `base`
    std::string dest;
    // A directory target that did not exist is built under a temporary name in its parent
    // (`parent`, `staged_name`) and renamed to `final_leaf` once complete: files go straight
    // under their final names inside it (no O_TMPFILE, no link or rename per file), and the tree
    // appears whole or not at all; a kill -9 leaves only the temporary, which the next extract
    // into that parent removes.
    bool staged = false;
    bool topdir_set = false;  // set_topdir_flag() on the staged directory, cleared before publishing
    // Staged in a directory of our egid without the setgid bit: everything created inside gets our
    // euid and egid (see needs_chown()).
    bool creates_as_self = false;
    Fd parent;
    std::string staged_name, final_leaf;
  };
  struct ActiveFile {
    EntryId id = 0;
    // Borrowed from dirs_: valid while this file is active, because nothing walks to another
    // directory until it is finished (write_files() starts the next file only after that).
    int dir = -1;
    Fd file;
    std::string tmp;           // empty for an unnamed O_TMPFILE or a direct file
    bool direct = false;       // created under its final name in a staged target (see Target)
    uint64_t end_written = 0;  // end of the last pwrite: ftruncate only when a hole ends the file
    uint64_t written = 0;
  };

  std::string entry_label(const Item& it) const { return "entry " + quote_path(idx_.path(it.id)); }

  // The parent directory of `it` (items come depth first, so this is usually one openat).
  Result<int> parent_dir(const Item& it) {
    const Target& t = targets_[it.target];
    if (!t.is_dir) return t.base.get();
    const EntryId top = cfg_.targets[it.target].entry;
    if (it.id == top) return Status(ErrorCode::kInternal, "parent_dir of a target directory");
    return dir_fd(it.target, it.e.parent, it);
  }
  // Directory entry `dir` of target `target`, opened from the target without following symlinks.
  Result<int> dir_fd(uint32_t target, EntryId dir, const Item& it) {
    if (dirs_target_ != target) {
      dirs_.reset(&idx_, targets_[target].base.get(), cfg_.targets[target].entry);
      // Staged targets: directories are made by the walk just before their first entry (see
      // DirStack::set_create_missing); make_dirs(true) makes the rest (empty ones) afterwards.
      dirs_.set_create_missing(
          targets_[target].staged && walk_creates_, [this, target](EntryId d) { return made_ahead(target, d); },
          [this](EntryId d) { return mkdir_mode(d); });
      dirs_target_ = target;
    }
    return dirs_.open(dir, [&] { return entry_label(it); });
  }
  // Whether the directories-ahead thread has made directory `dir` of target `target`.
  bool made_ahead(uint32_t target, EntryId dir) const {
    return ahead_ && target < ahead_job_.size() && ahead_job_[target] != SIZE_MAX && ahead_->made(ahead_job_[target], dir);
  }
  std::string leaf_name(const Item& it) const { return targets_[it.target].is_dir ? std::string(it.e.name) : targets_[it.target].leaf; }
  std::string tmp_name() { return extract_temporary_name(tmp_counter_++); }
  // A name this run created where nothing was before (rollback() removes it on failure). Only
  // names in directories that existed are recorded: a directory this run made goes as a whole.
  struct Created {
    uint32_t target = 0;
    EntryId parent = 0;  // the directory entry holding `name`; the target's base when base_dir
    bool base_dir = false;
    std::string name;
  };
  bool parent_is_new(const Item& it) const {
    const Target& t = targets_[it.target];
    if (!t.is_dir) return false;
    EntryId p = it.e.parent;
    return p == cfg_.targets[it.target].entry ? t.created : made_dirs_.count(p) > 0;
  }
  void note_created(const Item& it) {
    if (parent_is_new(it)) return;
    const Target& t = targets_[it.target];
    if (t.created) return;  // the whole target goes
    bool base = !t.is_dir || it.e.parent == cfg_.targets[it.target].entry;
    created_.push_back(Created{it.target, base ? 0 : it.e.parent, base, leaf_name(it)});
  }
  // Names in a directory that existed before this run, with their d_type, read once by
  // sweep_temporaries(): a file whose name is taken goes the temp-name + rename way at once, one
  // that is not is linked straight in (no failing linkat or mkdirat per entry of a re-extract).
  using Listing = std::unordered_map<std::string, unsigned char>;
  static constexpr EntryId kBaseKey = UINT32_MAX;  // listing key of a non-directory target's directory
  const Listing* parent_listing(const Item& it) const {
    auto f = listings_.find({it.target, targets_[it.target].is_dir ? it.e.parent : kBaseKey});
    return f == listings_.end() ? nullptr : &f->second;
  }
  bool name_taken(const Item& it) const {
    const Listing* l = parent_listing(it);
    return l != nullptr && l->count(leaf_name(it)) > 0;
  }
  // Puts the finished temporary `tmp` (in `dir`) at `leaf`; records the name when it is new.
  Status rename_into_place(int dir, const std::string& tmp, const Item& it) {
    const std::string leaf = leaf_name(it);
    if (name_taken(it)) {
      if (::renameat(dir, tmp.c_str(), dir, leaf.c_str()) != 0) return errno_status("renaming into place " + entry_label(it));
      return Status();
    }
    if (::renameat2(dir, tmp.c_str(), dir, leaf.c_str(), RENAME_NOREPLACE) == 0) {
      note_created(it);
      return Status();
    }
    // Replaces what is there (renameat2 unsupported: not recorded, a user's file is never removed).
    if ((errno == EEXIST || errno == EINVAL || errno == ENOSYS) && ::renameat(dir, tmp.c_str(), dir, leaf.c_str()) == 0) return Status();
    return errno_status("renaming into place " + entry_label(it));
  }
  void sweep_temporaries(int dirfd, Listing& names);
  // Whether `e` needs a chown: owners are restored and the entry's would not be what creating it
  // gives anyway. In a staged target whose directory is ours (our egid, no setgid bit), every
  // entry is created with our euid and egid, so for an entry saved with those (root restoring a
  // tree root saved, the common case in CI) the fchown per file is skipped; elsewhere (an
  // existing directory may be setgid) it is always done.
  bool needs_chown(const Item& it, const Entry& e) const {
    if (!cfg_.restore_owner) return false;
    return !(targets_[it.target].creates_as_self && e.uid == euid_ && e.gid == egid_);
  }
  // A file's mode can be given at creation (no fchmod) unless the umask would clear some of its
  // bits, it has setuid/setgid/sticky bits (a later fchown clears them) or it is chowned.
  bool mode_final_at_create(const Item& it, const Entry& e) const {
    const mode_t m = e.mode & 07777;
    return !needs_chown(it, e) && (m & 07000) == 0 && (m & umask_) == 0;
  }
  mode_t create_mode(const Item& it, const Entry& e) const { return mode_final_at_create(it, e) ? (e.mode & 07777) : 0600; }
  // A directory of a staged target is made at its final mode when nothing would change that
  // later (mode_final_at_create()) and the mode lets this run fill it (u+rwx): finish_dirs() then
  // sets only its mtime, by name in its parent (node: 2,884 fchmod fewer, and no openat + close
  // of a directory without subdirectories). Others are made 0700 and get their mode in
  // finish_dirs(), as before.
  bool dir_mode_final(const Item& it) const {
    return targets_[it.target].staged && !it.create_only && !it.e.implicit_dir && it.id != cfg_.targets[it.target].entry &&
           (it.e.mode & 0700) == 0700 && mode_final_at_create(it, it.e);
  }
  mode_t mkdir_mode(EntryId dir) const { return dir < mkdir_mode_.size() ? mkdir_mode_[dir] : 0700; }
  bool xattr_wanted(const std::string& name) const {
    if (name.rfind("user.", 0) == 0) return true;
    for (const auto& p : cfg_.xattrs_include)
      if (::fnmatch(p.c_str(), name.c_str(), 0) == 0) return true;
    return false;
  }
  void rollback();

  Status set_times(int dirfd, const std::string& name, const Entry& e, int flags, const Item& it) {
    struct timespec ts[2];
    fill_mtime(e, ts);
    if (::utimensat(dirfd, name.c_str(), ts, flags) != 0) return errno_status("setting mtime of " + entry_label(it));
    return Status();
  }
  Status apply_xattrs(int fd, const Entry& e, const Item& it) {
    if (!e.has_xattrs || !cfg_.restore_xattrs) return Status();
    for (const auto& x : idx_.xattrs(e.id))
      if (xattr_wanted(x.name) && ::fsetxattr(fd, x.name.c_str(), x.value.data(), x.value.size(), 0) != 0)
        warn("cannot set xattr " + quote_path(x.name) + " on " + entry_label(it) + ": " + std::strerror(errno));
    return Status();
  }
  void warn(const std::string& m) {
    std::lock_guard lock(warn_mu_);  // file writers warn too (an xattr refused)
    if (cfg_.warn) cfg_.warn(m);
    else std::cerr << "lazycache: warning: " << m << "\n";
  }

  bool can_stage(const std::string& dest) const;
  Status stage_target(Target& out);
  Status publish_staged();
  Status open_targets();
  Status select_items();
  Status make_dirs(bool staged_pass);
  void start_fetch();
  void start_dirs_ahead();
  Status write_files();
  Status start_file(const Item& it, ActiveFile& af);
  Status open_file(const Item& it, ActiveFile& af);
  Status write_whole_file(const Item& it, int dir, const char* data, size_t n);
  Result<std::shared_ptr<const Fd>> shared_parent_dir(const Item& it);
  int writer_count() const;
  void report_progress() {
    if (!cfg_.progress) return;
    ExtractProgress p = progress_;
    p.files_done += files_written_.load();
    p.bytes_done += bytes_written_.load();
    cfg_.progress(p);
  }
  Status write_piece(ActiveFile& af, const char* data, size_t n);
  // A staged file spanning frames, its pieces written by the file writers (see SplitFile).
  struct SplitFile;
  Status start_split_file(const Item& it, std::shared_ptr<SplitFile>& out);
  Status split_piece(FileWriterPool& writers, const std::shared_ptr<SplitFile>& sf, const FileWriterPool::Frame& frame, const char* data,
                     size_t n);
  Status drop_split_hold(SplitFile& sf);
  Status finish_file(const Item& it, ActiveFile& af);
  Status link_tmpfile(ActiveFile& af, const Item& it);
  Status make_links();
  Status make_symlinks();
  Status finish_dirs();
  bool symlink_escapes(const Item& it) const;
  Status check_symlinks() const;

  const ArchiveReader& r_;
  const Index& idx_;
  const ExtractConfig& cfg_;
  std::vector<Target> targets_;
  std::vector<Item> items_;                // depth-first order, parents before children
  std::map<EntryId, size_t> leader_item_;  // link group -> item holding the data
  DirStack dirs_;
  uint32_t dirs_target_ = UINT32_MAX;  // the target dirs_ walks
  bool walk_creates_ = true;           // staged targets: the walk makes missing directories
  // Mode to make each directory of a staged target with, by entry id (see dir_mode_final()).
  std::vector<mode_t> mkdir_mode_;
  // Files written and their bytes, by this thread and the file writers (format/file_writer_pool.h).
  std::atomic<uint64_t> files_written_{0}, bytes_written_{0};
  std::atomic<uint64_t> files_by_writers_{0};  // of files_written_, by the file writers
  std::mutex warn_mu_;
  uint64_t tmp_counter_ = 0;
  bool tmpfile_ok_ = true;  // O_TMPFILE works here (else named temporaries)
  mode_t umask_ = 0777;     // see current_umask()
  uid_t euid_ = 0;          // who creates the entries (see needs_chown())
  gid_t egid_ = 0;
  std::set<EntryId> made_dirs_;                               // directories this run created
  std::map<std::pair<uint32_t, EntryId>, Listing> listings_;  // (target, directory entry)
  std::vector<Created> created_;                              // see note_created()
  ExtractStats stats_;
  ExtractProgress progress_;
  // File data holders in tar-stream order, the frames they need, and the pipeline reading them:
  // started by start_fetch() before the directories are made, so the first parts are on their way
  // while make_dirs() runs.
  struct PendingFile {
    uint64_t offset = 0, size = 0;
    size_t item = 0;
  };
  std::vector<PendingFile> pending_;
  std::vector<uint32_t> frames_;
  std::unique_ptr<FramePipeline> pipe_;
  // Staged targets' directories made from the index by a thread of their own (format/dirs_ahead.h),
  // started with the fetch; ahead_job_[target] is its job for that target (SIZE_MAX: none).
  std::unique_ptr<DirsAhead> ahead_;
  std::vector<size_t> ahead_job_;
};

bool Extractor::can_stage(const std::string& dest) const {
  auto [parent, leaf] = split_destination(dest);
  if (leaf.empty() || leaf == "." || leaf == ".." || parent == dest) return false;
  // Another target inside this one would create its directories for real before the rename.
  const std::string inside = (parent == "/" ? "" : parent) + "/" + leaf + "/";
  for (const auto& other : cfg_.targets) {
    auto [o_parent, o_leaf] = split_destination(other.dest_path);
    const std::string o = (o_parent == "/" ? "" : o_parent) + "/" + o_leaf + "/";
    if (o.size() > inside.size() && o.compare(0, inside.size(), inside) == 0) return false;
  }
  return true;
}

Status Extractor::stage_target(Target& out) {
  auto [parent, leaf] = split_destination(out.dest);
  LC_ASSIGN_OR_RETURN(out.parent, open_dir_path(parent, true));
  Listing ignored;
  sweep_temporaries(out.parent.get(), ignored);  // staged targets of dead extracts
  out.staged_name = tmp_name();
  out.final_leaf = leaf;
  if (::mkdirat(out.parent.get(), out.staged_name.c_str(), 0755) != 0)
    return errno_status("creating a temporary directory for " + out.dest);
  out.staged = true;  // from here on, rollback() removes it
  int fd = ::openat(out.parent.get(), out.staged_name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno_status("opening the temporary directory for " + out.dest);
  out.base = Fd(fd);
  out.topdir_set = set_topdir_flag(fd, true);
  struct stat st;
  out.creates_as_self = ::fstat(fd, &st) == 0 && st.st_uid == euid_ && st.st_gid == egid_ && (st.st_mode & S_ISGID) == 0;
  return Status();
}

Status Extractor::publish_staged() {
  for (auto& t : targets_) {
    if (!t.staged) continue;
    // The flag only guided where this run's directories went: the tree published is unflagged.
    if (t.topdir_set && !set_topdir_flag(t.base.get(), false)) warn("could not clear the directory-spread flag (chattr -T) on " + t.dest);
    const char* from = t.staged_name.c_str();
    const char* to = t.final_leaf.c_str();
    // NOREPLACE: something that appeared at the destination meanwhile is never replaced.
    int rc = ::renameat2(t.parent.get(), from, t.parent.get(), to, RENAME_NOREPLACE);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS))
      rc = ::renameat(t.parent.get(), from, t.parent.get(), to);  // replaces only an empty directory
    if (rc != 0) return errno_status("renaming the extracted tree into place at " + t.dest);
    t.staged = false;
  }
  return Status();
}

Status Extractor::open_targets() {
  if (cfg_.targets.empty()) return Status(ErrorCode::kInvalidArgument, "nothing to extract: no targets");
  for (const auto& t : cfg_.targets) {
    if (t.entry >= idx_.entry_count()) return Status(ErrorCode::kInvalidArgument, "target entry out of range");
    if (t.dest_path.empty()) return Status(ErrorCode::kInvalidArgument, "empty destination path");
    Target out;
    out.dest = t.dest_path;
    out.is_dir = idx_.entry(t.entry).type == EntryType::kDirectory;
    if (out.is_dir) {
      struct stat st;
      out.created = ::stat(t.dest_path.c_str(), &st) != 0 && errno == ENOENT;
      if (out.created && can_stage(t.dest_path)) {
        LC_RETURN_IF_ERROR(stage_target(out));
      } else {
        LC_ASSIGN_OR_RETURN(out.base, open_dir_path(t.dest_path, true));
      }
      if (!out.created) sweep_temporaries(out.base.get(), listings_[{static_cast<uint32_t>(targets_.size()), t.entry}]);
    } else {
      auto [parent, leaf] = split_destination(t.dest_path);
      out.leaf = leaf;
      if (out.leaf.empty() || out.leaf == "." || out.leaf == "..")
        return Status(ErrorCode::kInvalidArgument, "bad destination " + t.dest_path);
      LC_ASSIGN_OR_RETURN(out.base, open_dir_path(parent, true));
      sweep_temporaries(out.base.get(), listings_[{static_cast<uint32_t>(targets_.size()), kBaseKey}]);
    }
    targets_.push_back(std::move(out));
  }
  return Status();
}

Status Extractor::select_items() {
  std::set<EntryId> selected, ancestors;
  for (const auto& p : cfg_.only_paths) {
    auto id = idx_.lookup_path(p);
    if (!id) return Status(ErrorCode::kNotFound, quote_path(p) + " is not in the archive");
    selected.insert(*id);
    for (EntryId e = *id; e != idx_.root();) {
      e = idx_.entry(e).parent;
      ancestors.insert(e);
    }
  }
  auto in_selection = [&](EntryId id) {
    for (EntryId e = id;; e = idx_.entry(e).parent) {
      if (selected.count(e)) return true;
      if (e == idx_.root()) return false;
    }
  };
  for (uint32_t t = 0; t < cfg_.targets.size(); ++t) {
    std::vector<EntryId> stack{cfg_.targets[t].entry};
    while (!stack.empty()) {
      EntryId id = stack.back();
      stack.pop_back();
      bool chosen = selected.empty() || in_selection(id);
      bool ancestor = !chosen && ancestors.count(id);
      if (!chosen && !ancestor) continue;
      if (id != cfg_.targets[t].entry || !targets_[t].is_dir || chosen) items_.push_back(Item{id, t, ancestor, idx_.entry(id)});
      auto ch = idx_.children(id);
      for (uint32_t c = ch.first + ch.count; c-- > ch.first;) stack.push_back(c);
    }
  }
  mkdir_mode_.assign(idx_.entry_count(), 0700);
  for (const Item& it : items_)
    if (it.e.type == EntryType::kDirectory && dir_mode_final(it)) mkdir_mode_[it.id] = it.e.mode & 07777;
  for (size_t i = 0; i < items_.size(); ++i) {
    const Entry& e = items_[i].e;
    if (e.type == EntryType::kRegular) {
      ++progress_.files_total;
      if (leader_item_.emplace(e.link_group, i).second) progress_.bytes_total += e.size;
    }
  }
  return Status();
}

Status Extractor::make_dirs(bool staged_pass) {
  // Staged targets: the walk to every file, symlink and hardlink made its ancestors; only the
  // directories holding no such entry are left to make (no failing mkdirat per directory).
  std::set<std::pair<uint32_t, EntryId>> walked;
  if (staged_pass) {
    for (const auto& it : items_) {
      if (!targets_[it.target].staged || it.e.type == EntryType::kDirectory) continue;
      for (EntryId d = it.e.parent; d != cfg_.targets[it.target].entry && walked.insert({it.target, d}).second;) d = idx_.entry(d).parent;
    }
  }
  for (const auto& it : items_) {
    const Entry& e = it.e;
    if (e.type != EntryType::kDirectory) continue;
    if (it.id == cfg_.targets[it.target].entry) continue;  // the target directory itself exists already
    if (targets_[it.target].staged != staged_pass) continue;
    if (staged_pass) {
      if (walked.count({it.target, it.id})) {
        ++stats_.dirs;
        continue;
      }
      if (made_ahead(it.target, it.id)) {
        ++stats_.dirs;
        continue;
      }
      // Only this run writes in a staged target: a directory that exists was made by the walk.
      LC_ASSIGN_OR_RETURN(int dir, parent_dir(it));
      if (::mkdirat(dir, leaf_name(it).c_str(), mkdir_mode(it.id)) != 0 && errno != EEXIST)
        return errno_status("creating directory for " + entry_label(it));
      ++stats_.dirs;
      continue;
    }
    LC_ASSIGN_OR_RETURN(int dir, parent_dir(it));
    std::string name = leaf_name(it);
    const Listing* seen = parent_listing(it);
    auto known = seen ? seen->find(name) : Listing::const_iterator();
    const bool known_dir = seen && known != seen->end() && known->second == DT_DIR;
    if (!known_dir && ::mkdirat(dir, name.c_str(), 0700) == 0) {
      note_created(it);
      made_dirs_.insert(it.id);
    } else {
      if (!known_dir && errno != EEXIST) return errno_status("creating directory for " + entry_label(it));
      struct stat st;
      if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno_status("lstat for " + entry_label(it));
      if (!S_ISDIR(st.st_mode))
        return Status(ErrorCode::kPermissionDenied, entry_label(it) + ": a non-directory (" +
                                                        std::string(S_ISLNK(st.st_mode) ? "symlink" : "file") +
                                                        ") is in the way at the destination");
      // Keep an existing directory writable for us until finish_dirs() sets its mode.
      if ((st.st_mode & 0700) != 0700 && !e.implicit_dir && !it.create_only) ::fchmodat(dir, name.c_str(), (st.st_mode & 07777) | 0700, 0);
      // An existing directory may hold a temporary of an extract killed -9 (a new one cannot).
      LC_ASSIGN_OR_RETURN(int existing, dir_fd(it.target, it.id, it));
      sweep_temporaries(existing, listings_[{it.target, it.id}]);
    }
    ++stats_.dirs;
  }
  return Status();
}

Status Extractor::start_file(const Item& it, ActiveFile& af) {
  LC_ASSIGN_OR_RETURN(af.dir, parent_dir(it));
  return open_file(it, af);
}

// Creates the file of `it` in af.dir. From a file writer only for staged targets: that path
// touches nothing but `af` (no temporary names, no created-names record).
Status Extractor::open_file(const Item& it, ActiveFile& af) {
  af.id = it.id;
  af.tmp.clear();
  af.direct = false;
  af.end_written = 0;
  const mode_t mode = create_mode(it, it.e);
  int fd = -1;
  if (targets_[it.target].staged) {
    // A staged target is invisible until complete: the final name is safe to use at once.
    fd = ::openat(af.dir, leaf_name(it).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) return errno_status("creating " + entry_label(it));
    af.direct = true;
  } else if (tmpfile_ok_ && !name_taken(it)) {
    // Unnamed until complete: a kill -9 leaves nothing behind (the kernel frees it).
    fd = ::openat(af.dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) tmpfile_ok_ = false;
    else if (fd < 0) return errno_status("creating a temporary file for " + entry_label(it));
  }
  if (fd < 0) {
    af.tmp = tmp_name();
    fd = ::openat(af.dir, af.tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) return errno_status("creating a temporary file for " + entry_label(it));
  }
  af.file = Fd(fd);
  af.written = 0;
  return Status();
}

Status Extractor::write_piece(ActiveFile& af, const char* data, size_t n) {
  LC_RETURN_IF_ERROR(pwrite_sparse(af.file.get(), data, n, af.written, af.end_written, [&] { return idx_.path(af.id); }));
  af.written += n;
  bytes_written_ += n;
  return Status();
}

// The taking thread hands each piece of a split file, in order, to a file writer; whoever drops
// the last hold (the last piece written, or the taking thread after the last piece) finishes the
// file. Memory order: the holds are released with acq_rel, so the finisher sees every piece's end.
struct Extractor::SplitFile {
  const Item* it = nullptr;
  std::shared_ptr<const Fd> dir;  // the parent's descriptor, shared with the batches in it
  ActiveFile af;                  // file and `written`: the taking thread's until its hold goes
  std::atomic<uint64_t> end_written{0};
  std::atomic<int> holds{1};  // pieces in flight + the taking thread's
};

Status Extractor::start_split_file(const Item& it, std::shared_ptr<SplitFile>& out) {
  auto sf = std::make_shared<SplitFile>();
  sf->it = &it;
  LC_ASSIGN_OR_RETURN(sf->dir, shared_parent_dir(it));
  sf->af.dir = sf->dir->get();
  LC_RETURN_IF_ERROR(open_file(it, sf->af));
  out = std::move(sf);
  return Status();
}

Status Extractor::split_piece(FileWriterPool& writers, const std::shared_ptr<SplitFile>& sf, const FileWriterPool::Frame& frame,
                              const char* data, size_t n) {
  ActiveFile& af = sf->af;
  const uint64_t offset = af.written;
  af.written += n;
  bytes_written_ += n;
  sf->holds.fetch_add(1, std::memory_order_relaxed);
  return writers.submit(frame, [this, sf, data, n, offset] {
    uint64_t end = 0;
    Status s = pwrite_sparse(sf->af.file.get(), data, n, offset, end, [&] { return idx_.path(sf->af.id); });
    for (uint64_t seen = sf->end_written.load(); end > seen && !sf->end_written.compare_exchange_weak(seen, end);) {}
    if (!s.ok()) return s;  // the extract fails and removes the staged tree
    return drop_split_hold(*sf);
  });
}

Status Extractor::drop_split_hold(SplitFile& sf) {
  if (sf.holds.fetch_sub(1, std::memory_order_acq_rel) != 1) return Status();
  sf.af.end_written = sf.end_written.load();
  ++files_by_writers_;
  return finish_file(*sf.it, sf.af);
}

Status Extractor::finish_file(const Item& it, ActiveFile& af) {
  const Entry& e = it.e;
  Status st;
  if (af.end_written < e.size && ::ftruncate(af.file.get(), static_cast<off_t>(e.size)) != 0) {
    st = errno_status("truncating " + entry_label(it));
  } else if (needs_chown(it, e) && ::fchown(af.file.get(), e.uid, e.gid) != 0) {
    st = errno_status("chown " + entry_label(it));
  } else if (!mode_final_at_create(it, e) && ::fchmod(af.file.get(), e.mode) != 0) {
    st = errno_status("chmod " + entry_label(it));
  }
  if (st.ok()) st = apply_xattrs(af.file.get(), e, it);
  if (st.ok()) {
    struct timespec ts[2];
    fill_mtime(e, ts);
    if (::futimens(af.file.get(), ts) != 0) st = errno_status("setting mtime of " + entry_label(it));
  }
  if (st.ok() && !af.direct) st = af.tmp.empty() ? link_tmpfile(af, it) : rename_into_place(af.dir, af.tmp, it);
  if (!st.ok() && !af.tmp.empty()) ::unlinkat(af.dir, af.tmp.c_str(), 0);
  if (!st.ok() && af.direct) ::unlinkat(af.dir, leaf_name(it).c_str(), 0);
  af.file.reset();
  af.dir = -1;
  af.tmp.clear();
  ++files_written_;
  return st;
}

// A whole file on a file writer thread: `data` is all of its content, `dir` its (staged) parent.
Status Extractor::write_whole_file(const Item& it, int dir, const char* data, size_t n) {
  ActiveFile af;
  af.dir = dir;
  LC_RETURN_IF_ERROR(open_file(it, af));
  if (n > 0) {
    if (Status s = write_piece(af, data, n); !s.ok()) {
      af.file.reset();
      ::unlinkat(dir, leaf_name(it).c_str(), 0);
      return s;
    }
  }
  ++files_by_writers_;
  return finish_file(it, af);
}

// The parent of a staged target's file, shared with the writers' jobs in it: the walk's own
// descriptor (a DirStack level stays open while a job holds it), no dup per directory.
Result<std::shared_ptr<const Fd>> Extractor::shared_parent_dir(const Item& it) {
  LC_RETURN_IF_ERROR(parent_dir(it).status());  // the walk to it (dirs_ on this target)
  return dirs_.open_shared(it.e.parent, [&] { return entry_label(it); });
}

// File writers: only staged targets use them (see open_file), 0 = auto.
int Extractor::writer_count() const {
  if (cfg_.writers > 0) return cfg_.writers;
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::clamp(2 * cpus, 2, 8);
}

void Extractor::start_fetch() {
  // Data holders sorted by their offset in the tar stream (offsets and sizes read from the index
  // once: the sort and the write loop would otherwise decode an entry per comparison and piece).
  auto& files = pending_;
  files.reserve(leader_item_.size());
  for (const auto& [group, item] : leader_item_) {
    const Entry& e = items_[item].e;
    files.push_back(PendingFile{e.data_offset, e.size, item});
  }
  std::sort(files.begin(), files.end(), [](const PendingFile& a, const PendingFile& b) { return a.offset < b.offset; });
  std::vector<uint32_t> frames;
  for (const PendingFile& p : files) {
    if (p.size == 0) continue;
    auto [first, last] = idx_.frames_for_range(p.offset, p.size);
    for (uint32_t f = first; f <= last; ++f)
      if (frames.empty() || frames.back() < f) frames.push_back(f);
  }
  int threads = cfg_.threads > 0 ? cfg_.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  uint64_t compressed = 0;
  for (uint32_t f : frames) compressed += idx_.frames()[f].compressed_size;
  const FetchPlan plan = choose_fetch_plan(compressed, parts_budget(cfg_.max_inflight_bytes, max_frame_bytes(idx_), threads),
                                           cfg_.concurrency, cfg_.part_size_bytes);
  stats_.concurrency = plan.concurrency;
  stats_.part_size_bytes = plan.part_bytes;
  frames_ = frames;
  pipe_ = std::make_unique<FramePipeline>(r_, std::move(frames), plan, cfg_.max_inflight_bytes, threads, cfg_.head);
  stats_.parts = static_cast<uint32_t>(pipe_->part_count());
}

void Extractor::start_dirs_ahead() {
  if (!cfg_.dirs_ahead) return;
  std::vector<DirsAhead::Job> jobs;
  ahead_job_.assign(targets_.size(), SIZE_MAX);
  for (uint32_t t = 0; t < targets_.size(); ++t) {
    if (!targets_[t].staged) continue;
    DirsAhead::Job job{targets_[t].base.get(), cfg_.targets[t].entry, {}, [this](EntryId d) { return mkdir_mode(d); }};
    for (const Item& it : items_)
      if (it.target == t && it.e.type == EntryType::kDirectory && it.id != job.top) job.dirs.push_back(it.id);
    if (job.dirs.empty()) continue;
    ahead_job_[t] = jobs.size();
    jobs.push_back(std::move(job));
  }
  if (!jobs.empty()) ahead_ = std::make_unique<DirsAhead>(idx_, std::move(jobs));
}

Status Extractor::write_files() {
  const auto& files = pending_;
  const auto& frames = frames_;
  FramePipeline& pipe = *pipe_;
  // Whole files of staged targets go to the file writers; a file spanning frames (and every file
  // of a target that existed: temporaries, links and the created-names record) is written here.
  std::unique_ptr<FileWriterPool> writers;
  const bool any_staged = std::any_of(targets_.begin(), targets_.end(), [](const Target& t) { return t.staged; });
  if (any_staged && writer_count() > 1)
    writers = std::make_unique<FileWriterPool>(
        writer_count(), std::max<uint64_t>(std::min(cfg_.max_inflight_bytes / 4, kWriterFrames * max_frame_bytes(idx_)), 1));
  size_t next = 0;  // next file in `files` to start
  ActiveFile af;
  std::shared_ptr<SplitFile> split;      // instead of af: a staged file spanning frames
  const PendingFile* current = nullptr;  // the file af (or split) holds
  bool active = false;
  auto finish_error = [&](Status s) {
    if (active && !af.tmp.empty()) ::unlinkat(af.dir, af.tmp.c_str(), 0);
    if (writers) writers->cancel();
    pipe.cancel();
    return s;
  };
  // Whole files go to the writers in batches of consecutive files of one frame: one queue
  // hand-off and wake-up per batch rather than per file, and consecutive files mostly share a
  // directory, so one writer creates them instead of several contending for its lock.
  struct Handed {
    const Item* it = nullptr;
    std::shared_ptr<const Fd> dir;
    const char* from = nullptr;
    size_t n = 0;
  };
  std::vector<Handed> batch;
  FileWriterPool::Frame batch_frame;  // the frame the batch reads (null: empty files only)
  uint64_t batch_bytes = 0;
  auto flush = [&]() -> Status {
    if (batch.empty()) return Status();
    auto job = [this, files = std::move(batch)] {
      for (const Handed& h : files) LC_RETURN_IF_ERROR(write_whole_file(*h.it, h.dir->get(), h.from, h.n));
      return Status();
    };
    batch.clear();
    batch_bytes = 0;
    return writers->submit(std::move(batch_frame), std::move(job));
  };
  // Hands file `pf` (all of it in `frame` from `from`, or empty) to the writers; false: not theirs.
  auto delegate = [&](const PendingFile& pf, const FileWriterPool::Frame& frame, const char* from) -> Result<bool> {
    const Item& it = items_[pf.item];
    if (!writers || !targets_[it.target].staged) return false;
    if (frame && batch_frame && frame != batch_frame) LC_RETURN_IF_ERROR(flush());
    if (frame) batch_frame = frame;
    LC_ASSIGN_OR_RETURN(std::shared_ptr<const Fd> dir, shared_parent_dir(it));
    const size_t n = static_cast<size_t>(pf.size);
    batch.push_back(Handed{&it, std::move(dir), from, n});
    batch_bytes += n;
    if (batch.size() >= kBatchFiles || batch_bytes >= kBatchBytes) LC_RETURN_IF_ERROR(flush());
    return true;
  };
  // Empty files need no frame.
  auto start_empty = [&]() -> Status {
    while (next < files.size() && files[next].size == 0) {
      LC_ASSIGN_OR_RETURN(bool handed, delegate(files[next], nullptr, nullptr));
      if (!handed) {
        ActiveFile empty;
        LC_RETURN_IF_ERROR(start_file(items_[files[next].item], empty));
        LC_RETURN_IF_ERROR(finish_file(items_[files[next].item], empty));
      }
      ++next;
    }
    return Status();
  };
  if (Status s = start_empty(); !s.ok()) return finish_error(s);
  for (size_t seq = 0; seq < frames.size(); ++seq) {
    auto data = pipe.take(seq);
    if (!data.ok()) return finish_error(data.error());
    ++stats_.frames_read;
    const FileWriterPool::Frame frame = std::move(*data);  // a recycled buffer (format/buffer_pool.h)
    const FrameInfo& f = idx_.frames()[frames[seq]];
    uint64_t f_end = f.uncompressed_offset + f.uncompressed_size;
    for (;;) {
      if (!active) {
        if (Status s = start_empty(); !s.ok()) return finish_error(s);
        if (next >= files.size() || files[next].offset >= f_end) break;
        current = &files[next];
        if (current->offset >= f.uncompressed_offset && current->offset + current->size <= f_end) {
          auto handed = delegate(*current, frame, frame->data() + (current->offset - f.uncompressed_offset));
          if (!handed.ok()) return finish_error(handed.error());
          if (*handed) {
            ++next;
            continue;
          }
        }
        if (writers) {  // the writers get what is batched before this thread writes a file itself
          if (Status s = flush(); !s.ok()) return finish_error(s);
        }
        const Item& it = items_[current->item];
        // A staged file spanning frames: its pieces go to the writers, one per frame.
        Status started = writers && targets_[it.target].staged ? start_split_file(it, split) : start_file(it, af);
        if (!started.ok()) return finish_error(started);
        active = true;
        ++next;
      }
      ActiveFile& file = split ? split->af : af;
      uint64_t from = current->offset + file.written;
      uint64_t to = std::min(current->offset + current->size, f_end);
      if (from < f.uncompressed_offset) return finish_error(Status(ErrorCode::kInternal, "frame order bug"));
      const char* piece = frame->data() + (from - f.uncompressed_offset);
      Status wrote = split ? split_piece(*writers, split, frame, piece, to - from) : write_piece(af, piece, to - from);
      if (!wrote.ok()) return finish_error(wrote);
      if (file.written < current->size) break;  // continues in the next frame
      active = false;
      Status finished = split ? drop_split_hold(*split) : finish_file(items_[current->item], af);
      split.reset();
      if (!finished.ok()) return finish_error(finished);
      report_progress();
    }
    if (writers) {
      if (Status s = flush(); !s.ok()) return finish_error(s);
    }
    report_progress();
  }
  if (Status s = start_empty(); !s.ok()) return finish_error(s);
  if (active || next != files.size()) return finish_error(Status(ErrorCode::kInternal, "files left unfinished after the last frame"));
  if (writers) {
    if (Status s = flush(); !s.ok()) return finish_error(s);
    if (Status s = writers->finish(); !s.ok()) return finish_error(s);
  }
  stats_.compressed_bytes_read = pipe.compressed_read();
  stats_.first_data = pipe.first_part_in();
  stats_.last_data = pipe.last_part_in();
  return Status();
}

Status Extractor::make_links() {
  for (size_t i = 0; i < items_.size(); ++i) {
    const Item& it = items_[i];
    const Entry& e = it.e;
    if (e.type != EntryType::kRegular) continue;
    size_t leader = leader_item_.at(e.link_group);
    if (leader == i) continue;
    const Item& li = items_[leader];
    LC_ASSIGN_OR_RETURN(int ldir_raw, parent_dir(li));
    Fd ldir(::dup(ldir_raw));
    LC_ASSIGN_OR_RETURN(int dir, parent_dir(it));
    if (targets_[it.target].staged && targets_[li.target].staged &&
        ::linkat(ldir.get(), leaf_name(li).c_str(), dir, leaf_name(it).c_str(), 0) == 0) {
      ++stats_.hardlinks;  // straight under the final name: the target is not visible yet
      ++progress_.files_done;
      continue;
    }
    std::string tmp = tmp_name();
    if (::linkat(ldir.get(), leaf_name(li).c_str(), dir, tmp.c_str(), 0) != 0) {
      if (errno != EXDEV && errno != EMLINK) return errno_status("hardlinking " + entry_label(it));
      // Different filesystems (roots restored to different mounts): copy instead.
      int in = ::openat(ldir.get(), leaf_name(li).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (in < 0) return errno_status("opening " + entry_label(li));
      Fd src(in);
      int out = ::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, e.mode);
      if (out < 0) return errno_status("creating " + entry_label(it));
      Fd dst(out);
      std::string buf(1 << 20, '\0');
      for (;;) {
        ssize_t n = ::read(src.get(), buf.data(), buf.size());
        if (n < 0) return errno_status("copying " + entry_label(it));
        if (n == 0) break;
        if (::write(dst.get(), buf.data(), static_cast<size_t>(n)) != n) return errno_status("copying " + entry_label(it));
      }
      if (needs_chown(it, e) && ::fchown(dst.get(), e.uid, e.gid) != 0) return errno_status("chown " + entry_label(it));
      if (::fchmod(dst.get(), e.mode) != 0) return errno_status("chmod " + entry_label(it));
      LC_RETURN_IF_ERROR(set_times(dir, tmp, e, AT_SYMLINK_NOFOLLOW, it));
    }
    if (Status s = rename_into_place(dir, tmp, it); !s.ok()) {
      ::unlinkat(dir, tmp.c_str(), 0);
      return s;
    }
    ++stats_.hardlinks;
    ++progress_.files_done;
  }
  return Status();
}

// Resolves the link as the kernel would from the symlink's directory, through the symlinks of
// this archive (at most 40 hops, Linux's limit), and says whether it leaves the target directory.
// Components the archive does not hold are taken lexically ("missing/.." stays where it was).
bool Extractor::symlink_escapes(const Item& it) const {
  const Entry& link = it.e;
  if (link.symlink_target.empty() || link.symlink_target[0] == '/') return true;
  constexpr EntryId kUnknown = UINT32_MAX;  // a directory level not in the archive
  const EntryId top = cfg_.targets[it.target].entry;
  std::vector<EntryId> path;  // from the target down to the current directory
  if (targets_[it.target].is_dir) {
    for (EntryId e = link.parent;; e = idx_.entry(e).parent) {
      path.push_back(e);
      if (e == top) break;
    }
    std::reverse(path.begin(), path.end());
  } else {
    path.push_back(kUnknown);  // a lone symlink target: its directory is outside the archive
  }
  std::deque<std::string> todo;
  for (auto& c : split_path(link.symlink_target)) todo.push_back(std::move(c));
  int hops = 0;
  while (!todo.empty()) {
    std::string c = std::move(todo.front());
    todo.pop_front();
    if (c == "..") {
      if (path.size() == 1) return true;
      path.pop_back();
      continue;
    }
    std::optional<EntryId> next;
    if (path.back() != kUnknown) next = idx_.lookup(path.back(), c);
    if (!next) {
      path.push_back(kUnknown);
      continue;
    }
    Entry e = idx_.entry(*next);
    if (e.type == EntryType::kDirectory) {
      path.push_back(*next);
    } else if (e.type == EntryType::kSymlink) {
      if (++hops > 40 || e.symlink_target.empty() || e.symlink_target[0] == '/') return true;
      auto comps = split_path(e.symlink_target);
      todo.insert(todo.begin(), comps.begin(), comps.end());
    } else if (!todo.empty()) {
      return false;  // a file in the middle: ENOTDIR, it resolves nowhere
    }
  }
  return false;
}

Status Extractor::check_symlinks() const {
  if (cfg_.external_symlinks != ExtractConfig::ExternalSymlinks::kRefuse) return Status();
  for (const auto& it : items_) {
    const Entry& e = it.e;
    if (e.type == EntryType::kSymlink && symlink_escapes(it))
      return Status(ErrorCode::kPermissionDenied, entry_label(it) + ": symlink target " + quote_path(e.symlink_target) +
                                                      " resolves outside the extraction directory (refused by --no-external-symlinks)");
  }
  return Status();
}

Status Extractor::link_tmpfile(ActiveFile& af, const Item& it) {
  // linkat(2) of an O_TMPFILE by its /proc path (AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH).
  const std::string proc = "/proc/self/fd/" + std::to_string(af.file.get());
  const std::string leaf = leaf_name(it);
  if (::linkat(AT_FDCWD, proc.c_str(), af.dir, leaf.c_str(), AT_SYMLINK_FOLLOW) == 0) {
    note_created(it);
    return Status();
  }
  if (errno != EEXIST) return errno_status("linking into place " + entry_label(it));
  // Something is there already: link under a temporary name and rename over it atomically.
  std::string tmp = tmp_name();
  if (::linkat(AT_FDCWD, proc.c_str(), af.dir, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0)
    return errno_status("linking into place " + entry_label(it));
  if (::renameat(af.dir, tmp.c_str(), af.dir, leaf.c_str()) != 0) {
    Status s = errno_status("renaming into place " + entry_label(it));
    ::unlinkat(af.dir, tmp.c_str(), 0);
    return s;
  }
  return Status();
}

void Extractor::sweep_temporaries(int dirfd, Listing& names) {
  // getdents64 on the walk's own descriptor (nothing else reads it): fdopendir would cost an
  // openat and an fstat more per directory.
  alignas(8) char buf[32 * 1024];
  std::vector<std::string> stale;
  for (;;) {
    ssize_t n = ::getdents64(dirfd, buf, sizeof buf);
    if (n <= 0) break;  // an unreadable directory: nothing known, nothing swept
    for (ssize_t off = 0; off < n;) {
      const auto* de = reinterpret_cast<const struct dirent64*>(buf + off);
      off += de->d_reclen;
      std::string_view name = de->d_name;
      if (name == "." || name == "..") continue;
      long pid = extract_temporary_pid(name);
      // A live PID may be another extract at work here (or a reused PID: then it stays, harmless).
      if (pid != 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.emplace_back(name);
      else names.emplace(name, de->d_type);
    }
  }
  for (const auto& n : stale)
    if (remove_tree(dirfd, n)) ++stats_.stale_temporaries;  // a file, or a staged target (a directory)
}

void Extractor::rollback() {
  for (size_t i = created_.size(); i-- > 0;) {
    const Created& c = created_[i];
    int dir = targets_[c.target].base.get();
    if (!c.base_dir) {
      auto d = dir_fd(c.target, c.parent, Item{c.parent, c.target, false, Entry{}});
      if (!d.ok()) continue;  // the way there is gone or blocked: nothing to follow
      dir = *d;
    }
    if (!remove_tree(dir, c.name)) warn("could not remove " + quote_path(c.name) + " after the failed extract");
  }
  for (const auto& t : targets_) {
    if (t.staged) {
      if (!remove_tree(t.parent.get(), t.staged_name))
        warn("could not remove the temporary " + quote_path(t.staged_name) + " after the failed extract");
      continue;
    }
    if (!t.created) continue;
    if (t.parent.valid()) {  // staged, then published: the tree at the destination is this run's
      if (!remove_tree(t.parent.get(), t.final_leaf)) warn("could not remove " + quote_path(t.dest) + " after the failed extract");
      continue;
    }
    auto [parent, leaf] = split_destination(t.dest);
    auto pd = open_dir_path(parent, false);
    if (!pd.ok() || !remove_tree(pd->get(), leaf)) warn("could not remove " + quote_path(t.dest) + " after the failed extract");
  }
}

Status Extractor::make_symlinks() {
  for (const auto& it : items_) {
    const Entry& e = it.e;
    if (e.type != EntryType::kSymlink) continue;
    LC_ASSIGN_OR_RETURN(int dir, parent_dir(it));
    const bool direct = targets_[it.target].staged;  // the final name is not visible yet
    std::string tmp = direct ? leaf_name(it) : tmp_name();
    if (::symlinkat(std::string(e.symlink_target).c_str(), dir, tmp.c_str()) != 0)
      return errno_status("creating symlink " + entry_label(it));
    Status st;
    if (needs_chown(it, e) && ::fchownat(dir, tmp.c_str(), e.uid, e.gid, AT_SYMLINK_NOFOLLOW) != 0)
      st = errno_status("chown " + entry_label(it));
    if (st.ok()) st = set_times(dir, tmp, e, AT_SYMLINK_NOFOLLOW, it);
    if (st.ok() && !direct) st = rename_into_place(dir, tmp, it);
    if (!st.ok()) {
      ::unlinkat(dir, tmp.c_str(), 0);
      return st;
    }
    ++stats_.symlinks;
  }
  return Status();
}

Status Extractor::finish_dirs() {
  // Deepest first, so setting a child's metadata does not change its parent's mtime afterwards.
  // Every directory exists by now: the walk only opens (no mkdirat per directory), and the
  // descriptor it returns is used as is (valid until the next walk; nothing here walks between).
  walk_creates_ = false;
  dirs_.set_create_missing(false);
  for (size_t i = items_.size(); i-- > 0;) {
    const Item& it = items_[i];
    const Entry& e = it.e;
    if (e.type != EntryType::kDirectory || it.create_only || e.implicit_dir || it.id == idx_.root()) continue;
    const bool is_target = it.id == cfg_.targets[it.target].entry;
    if (dir_mode_final(it) && !(e.has_xattrs && cfg_.restore_xattrs)) {
      // Only the mtime is left (no chown, no chmod, no xattrs): set by name in its parent, which
      // the walk holds for all its subdirectories. AT_SYMLINK_NOFOLLOW: nothing else writes in a
      // staged target, and even a symlink there would have its own times set, never its target's.
      LC_ASSIGN_OR_RETURN(int parent, parent_dir(it));
      LC_RETURN_IF_ERROR(set_times(parent, leaf_name(it), e, AT_SYMLINK_NOFOLLOW, it));
      continue;
    }
    int fd = targets_[it.target].base.get();
    if (!is_target) {
      LC_ASSIGN_OR_RETURN(fd, dir_fd(it.target, it.id, it));
    }
    if (needs_chown(it, e) && ::fchown(fd, e.uid, e.gid) != 0) return errno_status("chown " + entry_label(it));
    if (::fchmod(fd, e.mode) != 0) return errno_status("chmod " + entry_label(it));
    LC_RETURN_IF_ERROR(apply_xattrs(fd, e, it));
    struct timespec ts[2];
    fill_mtime(e, ts);
    if (::futimens(fd, ts) != 0) return errno_status("setting mtime of " + entry_label(it));
  }
  return Status();
}

Result<ExtractStats> Extractor::run() {
  auto start = std::chrono::steady_clock::now();
  // linkat(2) of an O_TMPFILE goes through /proc/self/fd (absent in some chroots and containers).
  tmpfile_ok_ = cfg_.unnamed_temporaries && ::access("/proc/self/fd", X_OK) == 0;
  umask_ = current_umask();
  euid_ = ::geteuid();
  egid_ = ::getegid();
  Status st = open_targets();
  if (st.ok()) st = select_items();
  if (st.ok()) st = check_symlinks();  // before anything is written
  if (st.ok()) start_fetch();
  if (st.ok()) start_dirs_ahead();
  if (st.ok()) st = make_dirs(false);
  if (st.ok()) st = write_files();
  pipe_.reset();  // cancels and joins: no thread outlives the data phase
  if (ahead_) {
    ahead_->stop();  // joined before any link is made (and before a rollback)
    stats_.dirs_ahead = ahead_->made_count();
  }
  if (st.ok()) st = make_links();
  if (st.ok()) st = make_symlinks();
  if (st.ok()) st = make_dirs(true);  // the staged targets' directories no entry needed on the way
  if (st.ok()) st = finish_dirs();
  if (st.ok()) st = publish_staged();
  if (!st.ok()) {
    rollback();
    return st;
  }
  report_progress();
  stats_.files = files_written_.load();
  stats_.file_bytes = bytes_written_.load();
  stats_.files_by_writers = files_by_writers_.load();
  stats_.dir_opens = dirs_.openat_calls();
  stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats_;
}

}  // namespace

std::vector<ExtractTarget> targets_under(const Index& index, const std::string& dir) { return {ExtractTarget{index.root(), dir}}; }

std::vector<ExtractTarget> targets_at_original_paths(const Index& index) {
  std::vector<ExtractTarget> out;
  for (const auto& r : index.roots()) out.push_back(ExtractTarget{r.entry, r.original_path});
  return out;
}

Result<ExtractStats> extract_archive(const ArchiveReader& reader, const ExtractConfig& config) {
  Extractor x(reader, config);
  return x.run();
}

}  // namespace lazycache::format
