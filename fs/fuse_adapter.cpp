// SPDX-License-Identifier: MIT
#include "fs/fuse_adapter.h"

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>

#include <cstring>
#include <iostream>
#include <memory>
#include <new>
#include <span>
#include <vector>

#include "fs/attr_stat.h"
#include "fs/errno_map.h"
#include "fs/fuse_reply.h"
#include "fs/inode_handles.h"
#include "fs/inode_numbers.h"

namespace lazycache::fs {
namespace {

static_assert(sizeof(fuse_ino_t) == 8, "inode numbers are entry ids + 2 (fs/inode_numbers.h) and need 64 bits");

// The read-only table's userdata: the Filesystem it serves and how its entries are numbered.
class ReadOnlyMount {
 public:
  ReadOnlyMount(Filesystem& fs, FuseMountConfig config)
      : fs_(fs), config_(std::move(config)), inodes_(config_.root, fs.index().entry_count()), has_xattrs_(any_xattrs(fs.index())) {}
  Filesystem& filesystem() { return fs_; }
  // False when no entry of the archive has an extended attribute (see op_getxattr).
  bool has_xattrs() const { return has_xattrs_; }
  const FuseMountConfig& config() const { return config_; }
  EntryId to_id(uint64_t ino) const { return inodes_.entry(ino); }
  uint64_t to_ino(EntryId id) const { return inodes_.inode(id); }
  RequestCounts& requests() { return requests_; }
  // Handles for READs that carry none (the kernel opened the file itself: kernel_opens).
  InodeHandles& handles() { return handles_; }

  // Set at init: the config asks for zero-message opens and the kernel takes ENOSYS for success.
  std::atomic<bool> kernel_opens{false};
  std::atomic<bool> kernel_opendirs{false};

 private:
  // Enough for the files a job reads at once; a file dropped from it is opened again, cheaply.
  static constexpr size_t kReadHandles = 1024;
  RequestCounts requests_;
  Filesystem& fs_;
  const FuseMountConfig config_;
  const InodeNumbers inodes_;
  InodeHandles handles_{[this](EntryId id) { return fs_.open(id, O_RDONLY); }, [this](uint64_t h) { fs_.release(h); }, kReadHandles};
  const bool has_xattrs_;

  static bool any_xattrs(const format::Index& index) {
    for (EntryId id = 0; id < index.entry_count(); ++id) {
      if (index.entry(id).has_xattrs) return true;
    }
    return false;
  }
};

ReadOnlyMount& mount_of(fuse_req_t req) { return *static_cast<ReadOnlyMount*>(fuse_req_userdata(req)); }

void count(fuse_req_t req, FuseRequest r, uint64_t n = 1) { mount_of(req).requests().add(r, n); }

using fuse_reply::guarded;
using fuse_reply::reply_error;

Result<fuse_entry_param> entry_param(ReadOnlyMount& m, EntryId id) {
  LC_ASSIGN_OR_RETURN(Attr a, m.filesystem().getattr(id));
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  e.ino = m.to_ino(id);
  e.generation = 1;
  e.attr = to_stat(a, e.ino);
  e.attr_timeout = m.config().timeout_seconds;
  e.entry_timeout = m.config().timeout_seconds;
  return e;
}

void op_init(void* userdata, fuse_conn_info* conn) {
  auto* m = static_cast<ReadOnlyMount*>(userdata);
  conn->max_background = m->config().max_background;
  conn->congestion_threshold = m->config().max_background * 3 / 4;
  if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
  // Always readdirplus: `ls -l` and `find` then need no lookup per name.
  conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
  // Zero-message opens: the kernel reports these as capable; ENOSYS to an open then means
  // "open it yourself" (with the page cache kept, and directory listings cached), for good.
  if (m->config().kernel_opens) {
    m->kernel_opens = (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0;
    m->kernel_opendirs = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0;
  }
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  count(req, FuseRequest::kLookup);
  guarded(req, [&] {
    ReadOnlyMount& m = mount_of(req);
    auto id = m.filesystem().lookup(m.to_id(parent), name);
    if (!id.ok()) {
      if (id.error().code() == ErrorCode::kNotFound) {
        // Negative entry: the name will not appear later, the kernel may remember that.
        fuse_entry_param e;
        std::memset(&e, 0, sizeof(e));
        e.entry_timeout = m.config().timeout_seconds;
        fuse_reply_entry(req, &e);
      } else {
        reply_error(req, id.error());
      }
      return;
    }
    auto e = entry_param(m, *id);
    if (!e.ok()) return reply_error(req, e.error());
    // Only once the reply is sent may its file be handed off late (the kernel knows it now).
    if (fuse_reply_entry(req, &*e) == 0) m.filesystem().note_known(*id);
  });
}

void op_forget(fuse_req_t req, fuse_ino_t, uint64_t) {
  count(req, FuseRequest::kForget);
  fuse_reply_none(req);
}
void op_forget_multi(fuse_req_t req, size_t n, fuse_forget_data*) {
  count(req, FuseRequest::kForget, n);
  fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  count(req, FuseRequest::kGetattr);
  guarded(req, [&] {
    ReadOnlyMount& m = mount_of(req);
    EntryId id = m.to_id(ino);
    auto a = m.filesystem().getattr(id);
    if (!a.ok()) return reply_error(req, a.error());
    struct stat st = to_stat(*a, m.to_ino(m.filesystem().canonical(id)));
    fuse_reply_attr(req, &st, m.config().timeout_seconds);
  });
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  count(req, FuseRequest::kReadlink);
  guarded(req, [&] {
    ReadOnlyMount& m = mount_of(req);
    auto target = m.filesystem().readlink(m.to_id(ino));
    if (!target.ok()) return reply_error(req, target.error());
    fuse_reply_readlink(req, target->c_str());
  });
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  count(req, FuseRequest::kOpendir);
  guarded(req, [&] {
    ReadOnlyMount& m = mount_of(req);
    auto kids = m.filesystem().children(m.to_id(ino));
    if (!kids.ok()) {
      fuse_reply_err(req, kids.error().code() == ErrorCode::kInvalidArgument ? ENOTDIR : errno_for(kids.error()));
      return;
    }
    // No handle is needed (readdir reads the index by inode): the kernel may open directories
    // itself from now on, and caches their listings as cache_readdir asks.
    if (m.kernel_opendirs) return void(fuse_reply_err(req, ENOSYS));
    fi->cache_readdir = 1;
    fi->keep_cache = 1;
    fuse_reply_open(req, fi);
  });
}

// Offsets: 1 after ".", 2 after "..", 3 + i after child i.
void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  ReadOnlyMount& m = mount_of(req);
  Filesystem& fs = m.filesystem();
  const EntryId dir = m.to_id(ino);
  auto kids = fs.children(dir);
  if (!kids.ok()) {
    fuse_reply_err(req, kids.error().code() == ErrorCode::kInvalidArgument ? ENOTDIR : errno_for(kids.error()));
    return;
  }
  // Not zeroed: only the first `used` bytes are sent, and the tree walk at mount lists thousands.
  auto buf = std::make_unique_for_overwrite<char[]>(size);
  size_t used = 0;
  std::vector<EntryId> described;  // readdirplus: the entries the reply names, for note_known()
  auto add = [&](const char* name, EntryId id, bool dot, off_t next) -> bool {
    size_t n;
    if (plus) {
      fuse_entry_param e;
      std::memset(&e, 0, sizeof(e));
      if (dot) {
        // The kernel ignores attributes of "." and ".."; ino 0 keeps it from counting a lookup.
        e.attr.st_ino = m.to_ino(id);
        e.attr.st_mode = S_IFDIR;
      } else {
        auto ep = entry_param(m, id);
        if (!ep.ok()) return true;  // skip an entry we cannot describe rather than fail the listing
        e = *ep;
      }
      n = fuse_add_direntry_plus(req, buf.get() + used, size - used, name, &e, next);
    } else {
      struct stat st;
      std::memset(&st, 0, sizeof(st));
      st.st_ino = m.to_ino(id);
      auto a = fs.getattr(id);
      st.st_mode = a.ok() ? a->mode : S_IFREG;
      n = fuse_add_direntry(req, buf.get() + used, size - used, name, &st, next);
    }
    if (n > size - used) return false;
    used += n;
    if (plus && !dot) described.push_back(id);
    return true;
  };
  auto reply = [&] {
    if (fuse_reply_buf(req, buf.get(), used) != 0) return;
    for (EntryId id : described) fs.note_known(id);  // late hand-off, after the reply
  };
  const EntryId parent = dir == m.config().root ? dir : fs.index().entry(dir).parent;
  if (off < 1 && !add(".", dir, true, 1)) return reply();
  if (off < 2 && !add("..", parent, true, 2)) return reply();
  for (uint64_t i = off < 3 ? 0 : static_cast<uint64_t>(off) - 2; i < kids->count; ++i) {
    const EntryId child = kids->first + static_cast<EntryId>(i);
    const std::string name(fs.index().entry(child).name);
    if (!add(name.c_str(), fs.canonical(child), false, static_cast<off_t>(i + 3))) break;
  }
  reply();
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  count(req, FuseRequest::kReaddir);
  guarded(req, [&] { do_readdir(req, ino, size, off, false); });
}
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  count(req, FuseRequest::kReaddir);
  guarded(req, [&] { do_readdir(req, ino, size, off, true); });
}
void op_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info*) {
  count(req, FuseRequest::kReleasedir);
  fuse_reply_err(req, 0);
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  count(req, FuseRequest::kOpen);
  guarded(req, [&] {
    ReadOnlyMount& m = mount_of(req);
    // Zero-message opens: checked and counted as any open (the access list, a directory's
    // prefetch) through the handle the file's READs will use; then ENOSYS, and the kernel opens
    // this file and every later one itself.
    if (m.kernel_opens) {
      if ((fi->flags & O_ACCMODE) != O_RDONLY) return void(fuse_reply_err(req, EROFS));
      auto h = m.handles().get(m.filesystem().canonical(m.to_id(ino)));
      if (!h.ok() && h.error().code() == ErrorCode::kInvalidArgument) return void(fuse_reply_err(req, EISDIR));
      if (!h.ok()) return reply_error(req, h.error());
      fuse_reply_err(req, ENOSYS);
      m.filesystem().note_known(m.filesystem().canonical(m.to_id(ino)));
      return;
    }
    auto h = m.filesystem().open(m.to_id(ino), fi->flags);
    if (!h.ok()) {
      if (h.error().code() == ErrorCode::kPermissionDenied) return void(fuse_reply_err(req, EROFS));
      if (h.error().code() == ErrorCode::kInvalidArgument) return void(fuse_reply_err(req, EISDIR));
      return reply_error(req, h.error());
    }
    fi->fh = *h;
    fi->keep_cache = 1;
    fi->noflush = 1;
    if (fuse_reply_open(req, fi) != 0) return m.filesystem().release(*h);  // the opener was interrupted
    // A lookup's late hand-off can come before the kernel made the inode (notify_store fails):
    // at the open it surely exists.
    m.filesystem().note_known(m.filesystem().canonical(m.to_id(ino)));
  });
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  count(req, FuseRequest::kRead);
  guarded(req, [&] {
    ReadOnlyMount& m = mount_of(req);
    auto reply = [req](Result<std::vector<ReadPiece>> r) { fuse_reply::reply_pieces(req, r); };
    if (fi->fh != 0) return m.filesystem().read(fi->fh, static_cast<uint64_t>(off), size, reply);
    // Opened by the kernel itself (kernel_opens): the file's own handle, held through the call.
    auto h = m.handles().get(m.filesystem().canonical(m.to_id(ino)));
    if (!h.ok()) return reply_error(req, h.error());
    m.filesystem().read(**h, static_cast<uint64_t>(off), size, reply);
  });
}

void op_release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  count(req, FuseRequest::kRelease);
  if (fi->fh != 0) mount_of(req).filesystem().release(fi->fh);  // 0: a handle of InodeHandles
  fuse_reply_err(req, 0);
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
  count(req, FuseRequest::kStatfs);
  guarded(req, [&] {
    StatfsInfo s = mount_of(req).filesystem().statfs();
    struct statvfs st;
    std::memset(&st, 0, sizeof(st));
    st.f_bsize = s.block_size;
    st.f_frsize = s.block_size;
    st.f_blocks = s.blocks;
    st.f_files = s.files;
    st.f_namemax = s.name_max;
    st.f_flag = ST_RDONLY;
    fuse_reply_statfs(req, &st);
  });
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  count(req, FuseRequest::kXattr);
  guarded(req, [&] {
    ReadOnlyMount& m = mount_of(req);
    // An archive without extended attributes: ENOSYS tells the kernel the mount has none, and it
    // answers every later getxattr itself (EOPNOTSUPP) instead of sending it. Who asks: a kernel
    // overlayfs over the mount asks every entry for its trusted.overlay.* attributes (25,757
    // requests in a read of node's tree), exec asks each program for security.capability, ls
    // and cp for ACLs. listxattr is still answered (an empty list): overlayfs's copy-up asks it.
    if (!m.has_xattrs()) return void(fuse_reply_err(req, ENOSYS));
    auto v = m.filesystem().getxattr(m.to_id(ino), name);
    if (!v.ok()) return reply_error(req, v.error());
    fuse_reply::reply_xattr_value(req, size, *v);
  });
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  count(req, FuseRequest::kXattr);
  guarded(req, [&] {
    ReadOnlyMount& m = mount_of(req);
    auto names = m.filesystem().listxattr(m.to_id(ino));
    if (!names.ok()) return reply_error(req, names.error());
    fuse_reply::reply_xattr_names(req, size, *names);
  });
}

const fuse_lowlevel_ops* ops() {
  static const fuse_lowlevel_ops table = [] {
    fuse_lowlevel_ops o;
    std::memset(&o, 0, sizeof(o));
    o.init = op_init;
    o.lookup = op_lookup;
    o.forget = op_forget;
    o.forget_multi = op_forget_multi;
    o.getattr = op_getattr;
    o.readlink = op_readlink;
    o.opendir = op_opendir;
    o.readdir = op_readdir;
    o.readdirplus = op_readdirplus;
    o.releasedir = op_releasedir;
    o.open = op_open;
    o.read = op_read;
    o.release = op_release;
    o.statfs = op_statfs;
    o.getxattr = op_getxattr;
    o.listxattr = op_listxattr;
    return o;
  }();
  return &table;
}

}  // namespace

Result<std::unique_ptr<FuseMount>> FuseMount::mount(Filesystem& fs, FuseMountConfig config) {
  if (config.root >= fs.index().entry_count() || fs.index().entry(config.root).type != format::EntryType::kDirectory) {
    return Status(ErrorCode::kInvalidArgument, "mount root is not a directory of the archive");
  }
  auto userdata = std::make_shared<ReadOnlyMount>(fs, config);
  RequestCounts* requests = &userdata->requests();
  auto m = mount(FuseOps{ops(), std::move(userdata), /*writable=*/false, requests}, config);
  if (m.ok()) {
    const InodeNumbers inodes(config.root, fs.index().entry_count());
    (*m)->hand_off_page_cache(fs, [inodes](EntryId id, const std::function<bool(uint64_t)>& store) { return store(inodes.inode(id)); });
  }
  return m;
}

Result<std::unique_ptr<FuseMount>> FuseMount::mount(FuseOps op_table, FuseMountConfig config) {
  std::unique_ptr<FuseMount> m(new FuseMount(std::move(op_table), std::move(config)));
  const bool writable = m->ops_.writable;
  std::string opts = std::string(writable ? "" : "ro,") + "default_permissions,fsname=" + m->config_.fsname + ",subtype=lazycache";
  if (m->config_.allow_other) opts += ",allow_other";
  const char* argv[] = {"lazycache", "-o", opts.c_str()};
  fuse_args args = FUSE_ARGS_INIT(3, const_cast<char**>(argv));
  m->session_ = fuse_session_new(&args, m->ops_.table, sizeof(fuse_lowlevel_ops), m->ops_.userdata.get());
  fuse_opt_free_args(&args);
  if (m->session_ == nullptr) return Status(ErrorCode::kInternal, "fuse_session_new failed for " + m->config_.mountpoint);
  const std::string& at = m->config_.mount_at.empty() ? m->config_.mountpoint : m->config_.mount_at;
  if (fuse_session_mount(m->session_, at.c_str()) != 0) {
    fuse_session_destroy(m->session_);
    m->session_ = nullptr;
    return Status(ErrorCode::kIo,
                  "cannot mount FUSE at " + m->config_.mountpoint + " (is /dev/fuse available and the directory accessible?)");
  }
  return m;
}

void FuseMount::hand_off_page_cache(Filesystem& fs, PageCacheFilter filter) {
  handoff_fs_ = &fs;
  handoff_filter_ = std::move(filter);
}

void FuseMount::start() {
  // Page-cache hand-off (Filesystem::add_page_cache_sink), as the filter numbers the file (a
  // writable mount's filter refuses files whose bytes are not the archive's any more). Before the
  // kernel's INIT, notify_store fails (ENOSYS) and the file is simply not taken.
  if (handoff_fs_ != nullptr) {
    handoff_fs_->add_page_cache_sink(this, [this](EntryId id, uint64_t offset, std::span<const char> content) {
      return handoff_filter_(id, [this, offset, content](uint64_t ino) {
        fuse_bufvec buf{};  // what FUSE_BUFVEC_INIT makes (a C compound literal): one memory buffer
        buf.count = 1;
        buf.buf[0].size = content.size();
        buf.buf[0].mem = const_cast<char*>(content.data());
        buf.buf[0].fd = -1;
        return fuse_lowlevel_notify_store(session_, ino, static_cast<off_t>(offset), &buf, static_cast<fuse_buf_copy_flags>(0)) == 0;
      });
    });
  }
  loop_ = std::jthread([this] {
    fuse_loop_config* cfg = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(cfg, static_cast<unsigned>(config_.max_threads));
    fuse_loop_cfg_set_clone_fd(cfg, 1);
    fuse_session_loop_mt(session_, cfg);
    fuse_loop_cfg_destroy(cfg);
    finished_ = true;
    finished_.notify_all();
  });
}

RequestSnapshot FuseMount::requests() const { return ops_.requests != nullptr ? ops_.requests->snapshot() : RequestSnapshot{}; }

void FuseMount::wait() { finished_.wait(false); }

void FuseMount::stop() {
  if (unmounted_.exchange(true)) return;
  // While the loop still serves: a hand-off waiting on a page the kernel locked for a read ends
  // when that read is answered.
  if (handoff_fs_ != nullptr) handoff_fs_->remove_page_cache_sink(this);
  fuse_session_exit(session_);
  // Under a kernel overlay: while the FUSE mount is still attached at mount_at, the overlay never
  // took it over (its mount failed), and `mountpoint` is not ours to detach. Once the overlay
  // holds it (mount_at detached: EINVAL here), detaching the overlay ends the session.
  if (!config_.mount_at.empty() && ::umount2(config_.mount_at.c_str(), MNT_DETACH) == 0) return;
  // A detach wakes every handler blocked reading /dev/fuse (ENODEV) so the loop can end.
  if (::umount2(config_.mountpoint.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
    fuse_session_unmount(session_);  // non-root: fusermount3 -u -z
  }
}

FuseMount::~FuseMount() {
  if (session_ == nullptr) return;
  if (handoff_fs_ != nullptr) handoff_fs_->remove_page_cache_sink(this);  // never a notification on a destroyed session
  if (loop_.joinable()) {
    if (!finished_) stop();
    loop_.join();
  }
  fuse_session_unmount(session_);
  fuse_session_destroy(session_);
}

}  // namespace lazycache::fs
